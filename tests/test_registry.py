"""The pass registry: names match the passes, factories load, the Universe plugs into xdsl-opt."""

import subprocess
import sys

import pytest
from xdsl.passes import ModulePass
from xdsl.universe import Universe

from fusec import registry
from fusec.registry import FUSEC_UNIVERSE, PASSES, make_context


@pytest.mark.parametrize("name", list(PASSES))
def test_each_key_is_its_pass_name(name):
    cls = PASSES[name]()
    assert issubclass(cls, ModulePass)
    assert cls.name == name


def test_core_passes_are_listed():
    assert {"form-kernels", "canonicalize", "dce"} <= set(PASSES)


def test_every_pass_module_in_the_folder_is_registered():
    """A pass file nobody registered is a pass nobody can run: every ModulePass under passes/ is in the table."""
    import importlib
    import inspect
    import pkgutil

    import fusec.passes

    registered = {PASSES[name]() for name in PASSES}
    for info in pkgutil.iter_modules(fusec.passes.__path__):
        module = importlib.import_module(f"fusec.passes.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, ModulePass) and cls.__module__ == module.__name__:
                assert cls in registered, f"{cls.__name__} ({module.__name__}) is not in fusec.registry"


def test_every_pass_has_a_summary():
    for name, factory in PASSES.items():
        summary = registry.pass_summary(name, factory())
        assert summary and summary != "(no description)" and "\n" not in summary, name


def test_make_context_loads_the_dialects():
    ctx = make_context()
    for name in ("builtin", "arith", "math", "fusec"):
        assert ctx.get_optional_dialect(name) is not None, name
    assert ctx.get_optional_op("fusec.kernel") is not None


def test_universe_holds_only_what_fusec_owns():
    assert set(FUSEC_UNIVERSE.all_dialects) == {"fusec"}
    assert "form-kernels" in FUSEC_UNIVERSE.all_passes
    assert not {"canonicalize", "dce"} & set(FUSEC_UNIVERSE.all_passes)  # xDSL's universe has them
    multiverse = Universe.get_multiverse()  # raises on a name defined twice
    assert multiverse.all_dialects["fusec"]().name == "fusec"
    assert multiverse.all_passes["form-kernels"]().name == "form-kernels"


def test_plain_xdsl_opt_runs_fusec_passes(tmp_path):
    path = tmp_path / "g.mlir"
    path.write_text("""fusec.graph @g(%a : !fusec.tensor<[s0], f32>) -> (!fusec.tensor<[s0], f32>) symbols(s0 in [1, inf]) {
  %n = fusec.pointwise "neg" %a : (!fusec.tensor<[s0], f32>) -> !fusec.tensor<[s0], f32>
  fusec.output %n : !fusec.tensor<[s0], f32>
}
""")
    code = "import sys; from xdsl.tools.xdsl_opt import main; sys.argv[0] = 'xdsl-opt'; main()"
    result = subprocess.run([sys.executable, "-c", code, str(path), "-p", "form-kernels"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "fusec.kernel @fusec_poi_neg_0" in result.stdout
