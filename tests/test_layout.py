"""The glossary of helpers (its package docstring) and the layout in docs/development.md name every module, and
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


def test_the_layout_section_names_every_module():
    layout = (ROOT / "docs" / "development.md").read_text()
    missing = [name for name in MODULES if f"`{name}`" not in layout]
    assert not missing, f"docs/development.md's layout section misses {missing}"


def test_the_readme_reads_in_two_minutes_and_links_the_rest():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 120, "README: at most about 120 lines; details go to docs/"
    for link in ("docs/instructors.md", "docs/development.md", "make run", "make test", "make lab"):
        assert link in readme, link
    for lesson in sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb")):
        assert f"`{lesson}`" in readme, f"README's lesson table misses {lesson}"


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
