"""Fixtures shared by test folders."""

import os

import pytest
import torch

MAX_WORKERS = 4  # each worker imports torch and compiles its own kernels: more would trade memory for little


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The whole suite (``python -m pytest``, no test named) runs on every core, up to MAX_WORKERS, where
    pytest-xdist is installed: on CI's two cores 10.5 minutes against 14.7 in one process.  A named test, file or
    folder runs in this process (workers would take longer to start than it runs); ``-n N`` chooses, ``-n 0`` or
    ``-p no:xdist`` runs in one."""
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker runs its share in its own process
        return
    if not config.pluginmanager.hasplugin("xdist") or config.getoption("numprocesses", None) is not None:
        return
    if config.args_source != pytest.Config.ArgsSource.TESTPATHS or config.getoption("usepdb", False):
        return
    workers = min(MAX_WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    if workers > 1:
        config.option.numprocesses, config.option.dist, config.option.tx = workers, "load", ["popen"] * workers


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory):
    """The whole suite caches kernels in a temporary folder, never in the user's ~/.cache/fusec.

    FUSEC_CACHE_DIR names a temporary folder, and HOME a temporary home, so that a code path
    that forgot the variable would write there (checked at the end) rather than into the
    user's home.  FUSEC_VERIFY_EACH=1 verifies the IR in full after every pass.  Set in the environment, not monkeypatched, so that subprocesses the tests
    start inherit them; the dump folder is unset so that no test writes where the user said.
    """
    names = ("FUSEC_CACHE_DIR", "FUSEC_DUMP_DIR", "FUSEC_VERIFY_EACH", "FUSEC_GRAPH_CACHE", "HOME")
    saved = {k: os.environ.get(k) for k in names}
    home = tmp_path_factory.mktemp("home")
    os.environ["HOME"] = str(home)
    os.environ["FUSEC_CACHE_DIR"] = str(tmp_path_factory.mktemp("fusec_cache"))
    os.environ.pop("FUSEC_DUMP_DIR", None)
    os.environ["FUSEC_VERIFY_EACH"] = "1"  # every pass's output through every verifier, as fusec-opt --verify-each
    os.environ["FUSEC_GRAPH_CACHE"] = "0"  # each test runs the pipeline it means to test; warm-start tests turn it on
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    leaked = sorted((home / ".cache" / "fusec").rglob("*"))
    assert not leaked, f"tests wrote into the home folder's fusec cache: {leaked[:3]}"


@pytest.fixture(autouse=True, scope="session")
def _unchecked_pointers_are_aligned():
    """A net under every launch the suite makes: a kernel pointer its launcher left unchecked (an allocation, an
    aligned input, a new matmul product, a view 16-byte multiples into one) does start 16-byte aligned.  On a GPU
    the kernel is compiled for that alignment; under the interpreter nothing else would notice the claim."""
    from fusec.runtime.kernel_runner import KernelRunner

    launch = KernelRunner.launch

    def checked_launch(self, grid, num_warps, *args):
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and i not in self.checked and a.numel() and a.data_ptr() % 16:
                raise AssertionError(f"{getattr(self.kernel, '__name__', self.kernel)}: argument {i} starts "
                                     f"{a.data_ptr() % 16} bytes past a 16-byte boundary, but its launcher does "
                                     "not check it (it marked it aligned)")
        return launch(self, grid, num_warps, *args)

    KernelRunner.launch = checked_launch
    yield
    KernelRunner.launch = launch


@pytest.fixture
def fresh_dynamo(monkeypatch):
    """Each test compiles from scratch: no graph or guard cached by an earlier test, and no dump into a folder
    the user's environment names."""
    monkeypatch.delenv("FUSEC_DUMP_DIR", raising=False)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def fake_process_group():
    """A two-rank fake process group in this process (no communication: a collective leaves its buffer as it
    is), for tests of what fusec makes of collectives; skipped where a group already exists."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    yield
    dist.destroy_process_group()
