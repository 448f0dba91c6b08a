"""Packaging guards: every sub-package reaches the wheel, and mapped folders refuse their bare names."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ["fusec", "dialects", "passes", "lowering", "tools"]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def package_name(folder: Path) -> str:
    """fusec.passes.sub for passes/sub, through [tool.setuptools.package-dir]."""
    rel = folder.relative_to(ROOT).as_posix()
    # The longest mapped folder that contains this one decides its package.
    matches = [(d, pkg) for pkg, d in SETUPTOOLS["package-dir"].items() if rel == d or rel.startswith(d.rstrip("/") + "/")]
    assert matches, f"{rel} is under no [tool.setuptools.package-dir] entry"
    d, pkg = max(matches, key=lambda m: len(m[0]))
    rest = rel[len(d):].strip("/")
    return ".".join([pkg, *rest.split("/")]) if rest else pkg


def python_packages() -> list[Path]:
    found = []
    for top in SOURCE_FOLDERS:
        for init in (ROOT / top).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.append(init.parent)
    return sorted(found)


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(SETUPTOOLS["packages"])
    missing = {package_name(folder) for folder in python_packages()} - listed
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml (else the wheel lacks them): {sorted(missing)}"


def test_listed_packages_exist():
    present = {package_name(folder) for folder in python_packages()}
    assert set(SETUPTOOLS["packages"]) <= present


def test_pipeline_files_are_package_data():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["fusec"]
    shipped = {p for pattern in patterns for p in (ROOT / "fusec").glob(pattern)}
    assert set((ROOT / "fusec" / "pipelines").glob("*.pipeline")) <= shipped


@pytest.mark.parametrize("bare", ["dialects", "passes", "lowering", "tools"])
def test_bare_folder_import_is_refused(bare):
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); import {bare}"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "ImportError" in result.stderr and f"import this folder as fusec.{bare}" in result.stderr, result.stderr


def test_each_mapped_folder_has_a_link_in_fusec():
    """Tools that walk the folder ``fusec/`` instead of importing (import-linter, so a bare ``lint-imports`` in the
    checkout) see the mapped folders through links named as their sub-packages; wheels take them from package-dir."""
    for package, folder in SETUPTOOLS["package-dir"].items():
        if package != "fusec":
            link = ROOT / "fusec" / package.removeprefix("fusec.").replace(".", "/")
            assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), f"ln -s ../{folder} {link.relative_to(ROOT)}"


def test_package_name_follows_the_mapping():
    assert package_name(ROOT / "passes") == "fusec.passes"
    assert package_name(ROOT / "passes" / "sub" / "deeper") == "fusec.passes.sub.deeper"
    assert package_name(ROOT / "fusec" / "runtime") == "fusec.runtime"
