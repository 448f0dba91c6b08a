"""The importer's whole op corpus (tests/corpus.py) end to end through ``torch.compile(backend="fusec")``.

The graphs run as the generated Triton kernels (``execute="triton"``): under Triton's interpreter on CPU
tensors, compiled on CUDA tensors.  Every result is checked against eager PyTorch on the same inputs:

* every corpus case, static shapes, with the baseline pipeline (``form-kernels``: one kernel per op)
  and with the default pipeline (fusion on);
* ``DYNAMIC_CASES`` with ``dynamic=True``: called at their inputs' sizes, then at other sizes through the
  same compiled function, which must not compile again;
* a matrix of dtypes, sizes (1, 17, 1023 and zero-size) and layouts (contiguous, transposed, sliced with a
  step, broadcast by ``expand``) on four representative programs.

The ``gpu`` variants run the same on CUDA tensors: ``pytest -m gpu tests/backend/test_corpus.py``.
"""

import itertools

import pytest
import torch
from corpus import CASES, DYNAMIC_CASES

# The two pipelines every program must run correctly with: the baseline, and the default (None).
PIPELINES = [pytest.param("form-kernels", id="form-kernels"), pytest.param(None, id="default")]
ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=ON_GPU)]

# A graph fusec cannot compile would run eagerly with this warning and match eager trivially: fail instead.
pytestmark = pytest.mark.filterwarnings("error:fusec. graph .* runs with torch")

# Corpus programs that make CPU tensors of their own (torch.full, torch.empty): with CUDA inputs eager fails too.
CPU_ONLY = {"full", "cat_promote_and_empty"}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()  # each test compiles its own function, never a cached or recompile-limited one
    yield
    torch._dynamo.reset()


def compile_fusec(fn, pipeline, dynamic, **options):
    options["execute"] = "triton"  # the generated kernels, never the reference interpreter
    if pipeline is not None:
        options["pipeline"] = pipeline
    return torch.compile(fn, backend="fusec", dynamic=dynamic, fullgraph=True, options=options)


def flat(values) -> list:
    if isinstance(values, (list, tuple)):
        return [v for x in values for v in flat(x)]
    return [values]


def tolerance(dtype: torch.dtype, device: str) -> dict:
    """tests/importer's tolerances (assert_matches_eager) for fp32 on CPU; fp16 and bf16 looser: fused kernels
    compute in fp32 and round once at the store, where eager rounds after every op (a few ulps apart
    where a sum cancels); the GPU's exp, tanh, ... may differ from eager's in the last bits."""
    if dtype in (torch.float16, torch.bfloat16):
        eps = torch.finfo(dtype).eps
        return {"rtol": 2 * eps, "atol": 2 * eps}
    return {"rtol": 1e-4, "atol": 1e-5 if device == "cpu" else 1e-4}


def assert_matches_eager(got, want) -> None:
    got, want = flat(got), flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        assert g.device == w.device, (g.device, w.device)
        torch.testing.assert_close(g.cpu(), w.cpu(), equal_nan=True, **tolerance(w.dtype, w.device.type))


def _case(name: str):
    return next(c for c in CASES if c[0] == name)


def _on(device: str, inputs) -> list:
    return [t.to(device) for t in inputs]


# ---------------------------------------------------------------- every corpus case, static shapes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("name, fn, make_inputs, aten_op", CASES, ids=[c[0] for c in CASES])
def test_corpus_case_matches_eager(name, fn, make_inputs, aten_op, pipeline, device):
    if device == "cuda" and name in CPU_ONLY:
        pytest.skip("the program makes CPU tensors of its own: eager fails on CUDA inputs too")
    inputs = _on(device, make_inputs())
    want = fn(*inputs)
    assert_matches_eager(compile_fusec(fn, pipeline, dynamic=False)(*inputs), want)


# ---------------------------------------------------------------- dynamic=True: one compiled graph, two sizes

# Sizes a program fixes, so that a new value is a new program: split(2, 1)'s output count, layer_norm's (6,).
FIXED_SIZES = {"split": {6}, "layer_norm": {6}}


def inputs_at_other_sizes(name: str, inputs: list[torch.Tensor], seed: int = 10) -> list[torch.Tensor]:
    """The inputs grown: every size d becomes 2d + 1 (1s stay, Dynamo specialises them; so do FIXED_SIZES).

    The map is one to one, so sizes equal before stay equal (Dynamo gives them one symbol); the values are
    drawn from the first inputs' values, so index tensors stay in range and positive inputs positive.
    """
    keep = {1} | FIXED_SIZES.get(name, set())
    grown = []
    for k, t in enumerate(inputs):
        shape = [d if d in keep else 2 * d + 1 for d in t.shape]
        picks = torch.randint(0, t.numel(), shape, generator=torch.Generator().manual_seed(seed + k))
        grown.append(t.flatten()[picks.to(t.device)])
    return grown


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("name", DYNAMIC_CASES)
def test_dynamic_case_runs_at_two_sizes_with_one_compiled_graph(name, pipeline, device, tmp_path):
    _, fn, make_inputs, _ = _case(name)
    first = _on(device, make_inputs())
    second = inputs_at_other_sizes(name, first)
    assert [t.shape for t in second] != [t.shape for t in first]
    compiled = compile_fusec(fn, pipeline, dynamic=True, dump_dir=str(tmp_path))
    for inputs in (first, second):
        assert_matches_eager(compiled(*inputs), fn(*inputs))
    graphs = list(tmp_path.iterdir())  # the dump has one folder per graph fusec compiled
    assert len(graphs) == 1, "the second size compiled again: " + ", ".join(p.name for p in graphs)
    assert "symbols(s" in (graphs[0] / "imported.mlir").read_text(), "the graph has no size symbols"


# ---------------------------------------------------------------- dtypes x sizes x layouts


def pointwise_chain(x, w, b):
    """Broadcasting both ways (w along rows, b along columns), a where on a predicate of x."""
    y = x * w + b
    return torch.where(x > 0, torch.sigmoid(y), y)


def row_sum_amax(x):
    return (x.sum(1), x.amax(1)) if x.shape[1] else x.sum(1)  # amax of an empty row is an error in eager


def mean_dim0(x):
    return x.mean(0)


def softmax(x):
    return x.softmax(-1)


FLOATS = (torch.float32, torch.float16, torch.bfloat16)
ALL_DTYPES = FLOATS + (torch.int32, torch.int64, torch.bool)
PROGRAMS = {"pointwise": (pointwise_chain, ALL_DTYPES), "row_sum_amax": (row_sum_amax, ALL_DTYPES),
            "mean_dim0": (mean_dim0, FLOATS), "softmax": (softmax, FLOATS)}  # torch has no int mean or softmax
LAYOUTS = ("contiguous", "transposed", "sliced", "expanded")
DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32",
               torch.int64: "i64", torch.bool: "bool"}


def _random(shape, dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    return torch.randint(-5, 6, shape, generator=gen, dtype=dtype)


def matrix_input(rows: int, cols: int, dtype: torch.dtype, layout: str, device: str) -> torch.Tensor:
    """A [rows, cols] tensor in one of LAYOUTS (the view is taken on the device: .to() would copy it dense)."""
    if layout == "contiguous":
        return _random((rows, cols), dtype, 0).to(device)
    if layout == "transposed":
        return _random((cols, rows), dtype, 0).to(device).t()
    if layout == "sliced":  # every other column: inner stride 2
        return _random((rows, 2 * cols), dtype, 0).to(device)[:, ::2]
    return _random((1, cols), dtype, 0).to(device).expand(rows, cols)  # row stride 0


def _matrix():
    """(program, dtype, (rows, cols), layout), kept small: each case compiles, and the interpreter is slow on
    reductions over many rows.  Layouts are index arithmetic whatever the dtype, so dtypes meet two layouts."""
    cases = []
    for program, (_, dtypes) in PROGRAMS.items():
        cases += itertools.product([program], dtypes, [(17, 17)], ["contiguous", "transposed"])
        cases += itertools.product([program], [torch.float32], [(17, 17)], ["sliced", "expanded"])
        # sizes 1 and 1023, and zero-size tensors (a static [0, 17] transposed once failed to fold its views)
        cases.append((program, torch.float32, (1, 1), "contiguous"))
        cases += itertools.product([program], [torch.float32], [(1023, 1), (0, 17), (17, 0)], LAYOUTS)
        cases += itertools.product([program], [torch.float32], [(1, 1023)], LAYOUTS[:3])  # expanded: contiguous again
    # many rows and long rows; row_sum_amax's reductions are softmax's
    for program in ["pointwise", "mean_dim0", "softmax"]:
        cases.append((program, torch.float32, (1023, 17), "transposed"))
    for program in ["pointwise", "softmax"]:
        cases.append((program, torch.bfloat16, (17, 1023), "contiguous"))
    return [pytest.param(*c, id=f"{c[0]}-{DTYPE_NAMES[c[1]]}-{c[2][0]}x{c[2][1]}-{c[3]}") for c in cases]


MATRIX = _matrix()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("program, dtype, shape, layout", MATRIX)
def test_matrix_matches_eager(program, dtype, shape, layout, pipeline, device):
    fn = PROGRAMS[program][0]
    rows, cols = shape
    inputs = [matrix_input(rows, cols, dtype, layout, device)]
    if fn is pointwise_chain:
        inputs += [_random((cols,), dtype, 1).to(device), _random((rows, 1), dtype, 2).to(device)]
    want = fn(*inputs)
    assert_matches_eager(compile_fusec(fn, pipeline, dynamic=False)(*inputs), want)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_conversions_match_eager_bit_for_bit(device):
    """fp32, fp64, fp16, int64 and bool to bf16 round like torch (to nearest even), and bf16 converts back by value."""
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    x[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 3.3895e38])  # 3.3895e38 rounds to the largest bf16
    i = torch.randint(-3000, 3000, (4096,), generator=torch.Generator().manual_seed(1))
    to_bf16 = lambda a: a.to(torch.bfloat16)  # noqa: E731
    cases = [(to_bf16, x), (to_bf16, x.double()), (to_bf16, x.half()), (to_bf16, i), (to_bf16, x > 0),
             (lambda a: (a * 100).to(torch.int32), x[4:].to(torch.bfloat16)), (lambda a: a.to(torch.bool), x.to(torch.bfloat16))]
    for fn, a in cases:
        torch._dynamo.reset()
        a = a.to(device)
        torch.testing.assert_close(compile_fusec(fn, "form-kernels", dynamic=False)(a), fn(a), rtol=0, atol=0, equal_nan=True)
