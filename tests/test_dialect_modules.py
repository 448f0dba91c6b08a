"""The fusec dialect is split over several modules; `fusec.dialects.fusec` stays the one namespace its users import."""

import importlib
import inspect

import pytest
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation

from fusec.dialects import fusec as F

PARTS = ["attributes", "pointwise", "graph_ops", "view_ops", "kernel_ops"]


@pytest.mark.parametrize("part", PARTS)
def test_every_public_name_of_a_part_is_reexported(part):
    module = importlib.import_module(f"fusec.dialects.{part}")
    missing = [name for name in module.__all__ if getattr(F, name, None) is not getattr(module, name)]
    assert not missing, f"fusec.dialects.fusec does not re-export these names of fusec.dialects.{part}: {missing}"
    assert set(module.__all__) <= set(F.__all__)


@pytest.mark.parametrize("part", PARTS)
def test_every_op_and_attribute_of_a_part_is_in_the_dialect(part):
    module = importlib.import_module(f"fusec.dialects.{part}")
    defined = [c for _, c in inspect.getmembers(module, inspect.isclass)
               if c.__module__ == module.__name__ and getattr(c, "name", "").startswith("fusec.")]
    ops = [c for c in defined if issubclass(c, IRDLOperation)]
    attrs = [c for c in defined if issubclass(c, Attribute)]
    assert set(ops) <= set(F.Fusec.operations), f"ops of {part} missing from the Dialect: {set(ops) - set(F.Fusec.operations)}"
    assert set(attrs) <= set(F.Fusec.attributes), f"attributes of {part} missing from the Dialect: {set(attrs) - set(F.Fusec.attributes)}"
    assert all(c.__name__ in module.__all__ for c in ops + attrs)


def test_the_dialect_holds_every_op_once():
    names = [op.name for op in F.Fusec.operations]
    assert len(names) == len(set(names)) == 19
    assert {a.name for a in F.Fusec.attributes} == {"fusec.expr", "fusec.tensor", "fusec.sym", "fusec.number",
                                                    "fusec.operand", "fusec.torch", "fusec.torch_op", "fusec.size_fact"}
