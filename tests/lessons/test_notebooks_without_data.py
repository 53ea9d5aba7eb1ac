"""Every notebook that reads data, started before `make data`, stops at its first cell with the message that says so.

The first code cell of every notebook after its install cell (course.links, which does nothing here: the course is
installed) runs in one kernel (the imports are paid once), against an empty data folder; each must fail with a
FileNotFoundError that says `make data`, except a lesson whose record (course.lessons) reads no data: it goes on.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from course.lessons import lesson_named

pytestmark = pytest.mark.notebook  # runs the first cell of every notebook: imports of torch, Ray, transformers
NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9]*.ipynb"))


@pytest.fixture(scope="module")
def first_cells(tmp_path_factory) -> dict[str, list[dict]]:
    """The outputs of each notebook's first code cell after the install cell, run against an empty data folder."""
    empty = tmp_path_factory.mktemp("no-data")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("COURSE_DATA_DIR", str(empty / "data"))
        env.setenv("COURSE_SOURCES", "standin")
        cells = []
        for path in NOTEBOOKS:
            notebook = nbformat.read(path, as_version=4)
            first = next(cell for cell in notebook.cells if "lessons.require_sources(" in cell.source)
            cells.append(nbformat.v4.new_code_cell(first.source))
        combined = nbformat.v4.new_notebook(cells=cells)
        NotebookClient(combined, timeout=180, kernel_name="python3", allow_errors=True).execute(
            cwd=str(NOTEBOOKS[0].parent)
        )
    return {path.name: cell.outputs for path, cell in zip(NOTEBOOKS, combined.cells, strict=True)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_missing_data_folder_says_make_data(path, first_cells):
    errors = [output for output in first_cells[path.name] if output.output_type == "error"]
    if not lesson_named(path.stem).sources:
        assert not errors, f"{path.name} reads no data, yet its first cell failed without it: {errors}"
        return
    assert errors, f"{path.name} went past its first cell without the data"
    assert errors[0].ename == "FileNotFoundError" and "make data" in errors[0].evalue, errors[0].evalue
