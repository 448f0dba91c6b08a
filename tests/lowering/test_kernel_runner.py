"""KernelRunner: launches through the compiled kernel Triton itself would pick for the same arguments."""

import pytest
import torch
from kernel_cases import randn
from test_runtime import _source

from fusec import runtime
from fusec.runtime import kernel_cache
from fusec.runtime.kernel_runner import KernelRunner, int_class
from fusec.testing import parse


def test_int_classes_are_the_properties_triton_specialises_on():
    assert int_class(1) == (True, False, True)
    assert int_class(32) == (False, True, True)
    assert int_class(17) == (False, False, True)
    assert int_class(2**31) == (False, True, False)
    assert int_class(-2**31) == (False, True, True)


class _Pointer:
    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


def test_the_key_holds_only_what_can_vary_at_the_launch_site():
    runner = KernelRunner(None, interpret=False, checked=[1], ints=[3])
    args = (_Pointer(8), _Pointer(8), 64, 17, 128)  # position 0 is known aligned, 2 is a literal
    assert runner.key(4, args) == (4, False, (False, False, True))
    assert runner.key(4, (_Pointer(8), _Pointer(32), 64, 16, 128)) == (4, True, (False, True, True))


def test_under_the_interpreter_a_launch_goes_through_triton():
    module = kernel_cache.load_kernel_module(_source("runner interpreter"), interpret=True)
    runner = KernelRunner(module.double, interpret=True, checked=[0], ints=[2])
    a = randn(10)
    out = torch.empty(10)
    runner.launch(1, 1, a, out, 10, 16)
    torch.testing.assert_close(out, a * 2)
    assert runner.compiled == {}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("n", [1, 16, 17, 1000])
@pytest.mark.parametrize("offset", [0, 1])
def test_on_the_gpu_each_key_holds_the_kernel_triton_picks(n, offset):
    module = kernel_cache.load_kernel_module(_source("runner gpu"), interpret=False)
    runner = KernelRunner(module.double, interpret=False, checked=[0], ints=[2])
    base = randn(n + 1, seed=n).cuda()
    a = base[offset:offset + n]  # offset 1: a pointer 4 bytes past 16-byte alignment
    for _ in range(2):  # the first launch goes through Triton, the second straight to the compiled kernel
        out = torch.full((n,), float("nan"), device="cuda")
        runner.launch((n + 127) // 128, 4, a, out, n, 128)
        torch.testing.assert_close(out, a * 2)
    (function,) = [entry[1] for entry in runner.compiled.values()]
    assert module.double[(1,)](a, out, n, 128, num_warps=4).function == function
    assert runner.key(4, (a, out, n, 128)) == (4, offset == 0, int_class(n))
    import triton
    if triton.__version__.startswith("3.6"):  # its C launch is called directly
        assert all(entry[3] is not None for entry in runner.compiled.values())


class _FakeCompiled:
    def __init__(self, log, config):
        self.log, self.config = log, config
        self.function, self.packed_metadata = f"function{config}", None

    def run(self, *launch):
        self.log.append(("run", self.config))


class _FakeJit:
    """Stands for a @triton.jit function: compiles per (constexprs, warps), records what launched."""

    def __init__(self):
        self.log, self.compiled = [], {}

    def __getitem__(self, grid):
        def launch(*args, num_warps):
            config = (args[-1], num_warps)
            self.log.append(("jit", config))
            return self.compiled.setdefault(config, _FakeCompiled(self.log, config))
        return launch


def test_constexprs_chosen_per_call_are_part_of_the_key(monkeypatch):
    monkeypatch.setattr("fusec.runtime.kernel_runner._driver_calls", (lambda: 0, lambda device: 0))
    jit = _FakeJit()
    runner = KernelRunner(jit, interpret=False, ints=[1], chosen=[2])  # (pointer, n, XBLOCK)
    a = _Pointer(16)
    for n, xblock in [(1000, 64), (1000, 64), (17, 32), (1000, 64), (3000, 64)]:
        runner.launch(1, 4, a, n, xblock)
    # a new block size is a new kernel even with the same warps and int classes (17 and 3000 class alike)
    assert jit.log == [("jit", (64, 4)), ("run", (64, 4)), ("jit", (32, 4)), ("run", (64, 4)), ("run", (64, 4))]


def test_the_launcher_keys_block_sizes_of_a_symbolic_domain():
    from kernel_cases import ROW_SUM_TEXT

    compiled = runtime.compile_module(parse(ROW_SUM_TEXT), {"s0": 8})
    ((name, checked, ints, chosen, dtypes, literals),) = compiled.launcher.launch_keys
    assert dtypes == ("f32", "f32")  # arg0 and buf0
    assert literals == ((3, "37"),)  # rnumel, compiled in (its divisibility by 16)
    launch = next(line.strip() for line in compiled.source.splitlines() if ".launch(" in line)
    assert launch.endswith("(xnumel + XBLOCK - 1) // XBLOCK, num_warps, arg0, buf0, xnumel, rnumel, XBLOCK, RBLOCK)")
    # arg0 is aligned by the prologue, buf0 by allocation; xnumel varies, rnumel = 37 is fixed
    assert (checked, chosen) == ((), (4, 5)) and ints == (2,)


UPCAST = """
builtin.module {{
  fusec.graph @g(%x : !fusec.tensor<[8, 16], {t}>) -> (!fusec.tensor<[8, 16], f32>) {{
    %c = fusec.pointwise "convert" %x : (!fusec.tensor<[8, 16], {t}>) -> !fusec.tensor<[8, 16], f32>
    fusec.output %c : !fusec.tensor<[8, 16], f32>
  }}
}}
"""


def test_sites_of_one_body_share_a_runner_only_with_equal_element_types():
    """An upcast to f32 reads as the same Triton source from f16 and from bf16: one body, two sites.  Their runners must differ
    (a runner keys its compiled kernels on warps and int classes only: a bf16 launch on the f16 binary would
    read bf16 bits as f16, silently -- what the bf16 attention gradients on the H100 showed)."""
    from fusec.runtime.compiled import _runners

    built = {}
    for t in ("f16", "bf16", "f16"):
        from fusec.passes.form_kernels import FormKernels
        from fusec.testing import apply_passes

        compiled = runtime.compile_module(apply_passes(parse(UPCAST.format(t=t)), FormKernels()), {})
        [kernel] = compiled.launcher.kernels
        built.setdefault(t, []).append(kernel.source)
        compiled._build(interpret=False)
    assert built["f16"][0] == built["bf16"][0]  # the premise: the body does not name its element type
    runners = {key[-2] for key in _runners if key[-2] in (("f16", "f32"), ("bf16", "f32"))}
    assert runners == {("f16", "f32"), ("bf16", "f32")}


ROW_SUM = """
builtin.module {
  fusec.graph @g(%x : !fusec.tensor<[4, 100000], f32>) -> (!fusec.tensor<[4], f32>) {
    %c = fusec.reduce "sum" %x dims [1] : !fusec.tensor<[4, 100000], f32> -> !fusec.tensor<[4], f32>
    fusec.output %c : !fusec.tensor<[4], f32>
  }
}
"""


def test_sites_of_one_body_share_a_runner_only_with_equal_literal_arguments():
    """One body launched with literal block sizes that differ (here by the lowering's max-rblock: RBLOCK 4096 and
    2048, 16 warps each).  A runner keys its compiled kernels on warps only, and Triton compiles constexprs in: a
    site sharing another's runner would run that site's binary (for an XBLOCK, on a grid sized for another: rows
    left undone, silently, on the GPU's fast path).  Each set of literals gets a runner of its own."""
    from fusec.lowering.triton_kernel import LoweringOptions
    from fusec.passes.form_kernels import FormKernels
    from fusec.runtime.compiled import _runners
    from fusec.testing import apply_passes

    added, sources = [], set()
    for max_rblock in (4096, 2048, 4096):
        compiled = runtime.compile_module(apply_passes(parse(ROW_SUM), FormKernels()), {},
                                          options=LoweringOptions(max_rblock=max_rblock))
        [kernel] = compiled.launcher.kernels
        sources.add(kernel.source)
        before = set(_runners)
        compiled._build(interpret=False)
        added.append([k for k in _runners if k not in before])
        ((*_, literals),) = compiled.launcher.launch_keys
        assert dict(literals)[5] == str(max_rblock)  # RBLOCK, after two pointers, two ints and XBLOCK
    assert len(sources) == 1  # the premise: one body
    assert [len(a) for a in added] == [1, 1, 0]  # a runner each for 4096 and 2048; 4096 again shares the first


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graphs_launching_one_body_with_different_block_sizes_each_get_their_binary(monkeypatch):
    """What the H100 showed before runners keyed their literals: a launch rule changed between two compiles in one
    process (here the pointwise heuristic: XBLOCK 256, then 512, one warp each) and the second graph ran the first
    one's XBLOCK=256 binary on a grid for 512 -- elements 512..999 of 1000 never written."""
    from fusec.analysis import heuristics
    from fusec.passes.form_kernels import FormKernels
    from fusec.testing import apply_passes

    text = SIGMOID_1000
    x = torch.randn(1000, device="cuda")
    for xblock in (256, 512):
        monkeypatch.setattr(heuristics, "pointwise_config", lambda xnumel, per_thread=0, b=xblock: heuristics.LaunchConfig(b, 0, 1))
        compiled = runtime.compile_module(apply_passes(parse(text), FormKernels()), {})
        assert f"XBLOCK={xblock}" in compiled.source
        (out,) = compiled([x])
        torch.testing.assert_close(out, torch.sigmoid(x))


SIGMOID_1000 = """
builtin.module {
  fusec.graph @g(%x : !fusec.tensor<[1000], f32>) -> (!fusec.tensor<[1000], f32>) {
    %c = fusec.pointwise "sigmoid" %x : (!fusec.tensor<[1000], f32>) -> !fusec.tensor<[1000], f32>
    fusec.output %c : !fusec.tensor<[1000], f32>
  }
}
"""


class _Triton36Launcher:
    """Triton 3.6's CudaLauncher as far as _c_launch reads it: __call__ only adds empty scratch buffers."""

    launch_cooperative_grid, launch_pdl = False, True
    global_scratch_size = profile_scratch_size = global_scratch_align = profile_scratch_align = 0
    _allocation = None

    def __init__(self, log):
        self.log = log

    def launch(self, *args):
        self.log.append(args)

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        def allocate_scratch(size, align, allocator):
            return None

        global_scratch = allocate_scratch(self.global_scratch_size, self.global_scratch_align, self._allocation)
        profile_scratch = allocate_scratch(self.profile_scratch_size, self.profile_scratch_align, self._allocation)
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                    global_scratch, profile_scratch, *args)


class _Triton39Launcher(_Triton36Launcher):
    """Triton 3.9's: named metadata parameters and the kernel's arguments passed as one tuple."""

    def __call__(self, gridX, gridY, gridZ, stream, function, kernel_metadata, launch_metadata, launch_enter_hook,
                 launch_exit_hook, *args):
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                    kernel_metadata, launch_metadata, launch_enter_hook, launch_exit_hook, None, None,
                    self.arg_annotations, self.kernel_signature, args)


def test_the_c_launch_is_called_directly_only_where_it_takes_what_tritons_call_would_pass():
    from fusec.runtime.kernel_runner import _c_launch

    log: list = []
    launcher = _Triton36Launcher(log)
    launch, cooperative, pdl = _c_launch(launcher)
    launch(8, 1, 1, "stream", "function", cooperative, pdl, None, None, "metadata", None, None, None, "x", 3)
    launcher(8, 1, 1, "stream", "function", "metadata", None, None, None, "x", 3)
    assert log[0] == log[1]  # the same C call as through Triton's own __call__
    assert _c_launch(_Triton39Launcher(log)) is None
    launcher.global_scratch_size = 128  # scratch to allocate: Triton's __call__ does it
    assert _c_launch(launcher) is None
    assert _c_launch(_FakeCompiled(log, None).run) is None
