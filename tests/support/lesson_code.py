"""The code a lesson writes in its cells, as objects a test can call: the notebook's own text, not a copy.

``from_notebook("03_ray_data", "add_labels")`` runs every import of the notebook, then the definitions
(``def``, ``class``) of the names asked for, and returns them. Nothing else of the notebook runs.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from executed import NOTEBOOKS
from python_source import parse


def _cells(notebook: str) -> list[ast.Module]:
    path = next(p for p in NOTEBOOKS if p.stem == notebook)
    sources = ["".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]
    return [parse(source) for source in sources]


def from_notebook(notebook: str, *names: str) -> Any:
    """The objects ``names`` as notebook ``notebook`` (file name without ``.ipynb``) defines them: one or a tuple."""
    cells = _cells(notebook)
    imports = [node for cell in cells for node in cell.body if isinstance(node, ast.Import | ast.ImportFrom)]
    definitions = {
        node.name: node
        for cell in cells
        for node in cell.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names
    }
    missing = [name for name in names if name not in definitions]
    assert not missing, f"{notebook} defines no {missing} at the top level of a code cell"
    namespace: dict[str, Any] = {"__name__": f"lesson_{notebook}"}
    exec(compile(ast.Module(body=imports, type_ignores=[]), notebook, "exec"), namespace)  # noqa: S102
    for name in names:
        exec(compile(ast.Module(body=[definitions[name]], type_ignores=[]), notebook, "exec"), namespace)  # noqa: S102
    found = tuple(namespace[name] for name in names)
    return found[0] if len(found) == 1 else found
