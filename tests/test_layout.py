"""The glossary of helpers (its package docstring) and the README's layout name every module, and
the real-data path never imports the stand-in generator."""

from __future__ import annotations

import ast
from pathlib import Path

import helpers

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(p.stem for p in (ROOT / "helpers").glob("*.py") if p.stem != "__init__")


def glossary_rows() -> set[str]:
    return {line.split()[0] for line in helpers.__doc__.splitlines() if line[:1].isalpha() and line.split()}


def test_the_glossary_names_every_module_and_nothing_else():
    rows = glossary_rows() & set(MODULES)
    assert rows == set(MODULES), f"helpers/__init__.py misses {set(MODULES) - rows}"


def test_the_readme_layout_names_every_module():
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in MODULES if f"`{name}`" not in readme]
    assert not missing, f"README's layout section misses {missing}"


def imports(module: str) -> set[str]:
    tree = ast.parse((ROOT / "helpers" / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_real_data_path_does_not_import_the_stand_in_generator():
    for module in ("beans", "ingest", "cifar", "features", "models", "train", "inference"):
        assert "helpers.synthetic" not in imports(module), f"helpers.{module} imports helpers.synthetic"
