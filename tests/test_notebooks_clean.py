"""Notebooks are committed without outputs or execution counts, and each one records its figures."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_outputs(path):
    cells = json.loads(path.read_text())["cells"]
    dirty = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and (c["outputs"] or c["execution_count"])]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_training_notebook_asserts_a_floor_and_records_it(path):
    source = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    assert "assert " in source and "accuracy" in source
    assert f'results.record("{path.stem}"' in source, "the notebook must record its figures for `make run`"
