"""Two maps, not five: the package docstrings and tests/test_architecture.py. A package's
docstring that names two or more of its modules is a map of the package, and a map must
name every module (and sub-package) beside it, so adding a module without drawing it fails
here. Read from the source, not by importing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import REPO
from tests.test_architecture import PACKAGES

# One module named is prose ("a Trainer executor that ..."); two or more is a list.
LISTS_FROM = 2
# The packages whose docstring is their map (README, "Layout", points here): one that
# stopped listing its modules would otherwise drop out of the check below unseen.
MAPPED = ("pipeline", "pipeline/cli", "pipeline/datasets", "pipeline/provenance", "pipeline/report", "pipeline/store",
          "pipeline/runners", "serving", "components", "components/csv_example_gen")


def modules_of(package: Path) -> list[str]:
    """The public modules and sub-packages of a package directory (a leading _ is private)."""
    names = [p.stem for p in package.glob("*.py")]
    names += [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(name for name in names if not name.startswith("_"))


def named_in(text: str, modules: list[str]) -> list[str]:
    return [name for name in modules if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text)]


def package_dirs() -> list[Path]:
    return sorted(init.parent for package in PACKAGES for init in (REPO / package).rglob("__init__.py"))


def docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


def test_the_maps_are_seen():
    # If these were not taken as maps, the check below would pass for nothing.
    for package in MAPPED:
        assert len(named_in(docstring(REPO / package), modules_of(REPO / package))) >= LISTS_FROM, package


@pytest.mark.parametrize("package", package_dirs(), ids=lambda p: str(p.relative_to(REPO)))
def test_a_package_that_lists_its_modules_lists_every_one(package):
    modules = modules_of(package)
    named = named_in(docstring(package), modules)
    if len(named) >= LISTS_FROM:
        assert sorted(set(modules) - set(named)) == []
