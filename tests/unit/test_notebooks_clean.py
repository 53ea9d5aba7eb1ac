"""Notebooks are committed without outputs or execution counts, and each one records a named headline.

What is checked is what git holds (the index: what the next commit takes), not the working copy: a
learner who saves a notebook with its outputs still passes the tests, and `make setup` installs
nbstripout as a git filter, so the outputs never reach a commit.
"""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import executed
import pytest
from python_source import parse

from course.lessons import lesson_named

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def in_git() -> bool:
    return subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True).returncode == 0


def committed(path: Path) -> str:
    """The notebook as git holds it: the staged version if any, else the last commit's."""
    relative = path.relative_to(ROOT).as_posix()
    shown = subprocess.run(["git", "show", f":{relative}"], cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0, f"{relative} is not in git: `git add` it (the nbstripout filter cleans it)"
    return shown.stdout


def code_cells_with_output(text: str) -> list[int]:
    cells = json.loads(text)["cells"]
    return [i for i, c in enumerate(cells) if c["cell_type"] == "code" and (c["outputs"] or c["execution_count"])]


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.skipif(not in_git(), reason="not a git checkout: nothing committed to check")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_has_no_outputs(path):
    dirty = code_cells_with_output(committed(path))
    assert not dirty, f"{path.name}: cells {dirty} are committed with outputs; run `make setup` (nbstripout) and re-add"


def test_the_nbstripout_filter_strips_what_a_learner_saved(tmp_path):
    """The filter `make setup` installs turns a notebook with outputs into the committed form."""
    notebook = json.loads(NOTEBOOKS[0].read_text())
    for i, cell in enumerate(c for c in notebook["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = i + 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["saved while learning\n"]}]
    saved = tmp_path / "saved.ipynb"
    saved.write_text(json.dumps(notebook))
    assert code_cells_with_output(saved.read_text())
    cleaned = subprocess.run(
        [sys.executable, "-m", "nbstripout", "--textconv", str(saved)], capture_output=True, text=True, check=True
    ).stdout
    assert not code_cells_with_output(cleaned)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_records_one_headline_against_the_floor_of_its_record(path):
    """`results.record(notebook, value)` raises below the floor of the notebook's record: the check is in code."""
    calls = executed.calls(path, "results.record")
    assert len(calls) == 1, f"{path.name}: {len(calls)} results.record calls (one headline per notebook)"
    assert ast.literal_eval(calls[0].args[0]) == path.stem, f"{path.name} records under another name"
    lesson = lesson_named(path.stem)
    assert lesson.headline.strip() and 0 < lesson.floor < 1, f"{path.name}: a named headline, a floor above chance"


def test_notebook_05_runs_its_tensorflow_step_only_where_tensorflow_is_installed():
    """Python 3.14 installs without TensorFlow (no wheels yet): the step is skipped, the notebook goes on."""
    path = ROOT / "notebooks" / "05_data_loading_playbook.ipynb"
    guarded, unguarded = 0, 0
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = parse("".join(cell["source"]))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            names = [alias.name for alias in getattr(node, "names", [])]
            uses = isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ray.train.tensorflow")
            uses = uses or (isinstance(node, ast.Import) and any(n.startswith("tensorflow") for n in names))
            if not uses:
                continue
            inside, ancestor = False, parents.get(node)
            while ancestor is not None:
                if isinstance(ancestor, ast.If) and "tensorflow_installed" in ast.unparse(ancestor.test):
                    inside = True
                if isinstance(ancestor, ast.FunctionDef):  # imported inside a worker function: runs only when called
                    inside = True
                ancestor = parents.get(ancestor)
            guarded, unguarded = guarded + inside, unguarded + (not inside)
    assert guarded and not unguarded, f"{unguarded} TensorFlow import(s) outside `if tensorflow_installed:`"


def bound_names(target: ast.expr) -> list[str]:
    """The names an assignment target binds: ``a`` and ``a, b`` do; ``a.b`` and ``a[0]`` change a value in place."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in bound_names(element)]
    return bound_names(target.value) if isinstance(target, ast.Starred) else []


def top_level_bindings(path: Path) -> list[tuple[str, str, int]]:
    """(name, kind, cell) for each name a code cell binds at its top level: imported, defined or assigned."""
    found = []
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    for number, cell in enumerate(cells, 1):
        for node in parse("".join(cell["source"])).body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found += [((a.asname or a.name).split(".")[0], "import", number) for a in node.names]
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                found.append((node.name, "definition", number))
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found += [(name, "value", number) for target in targets for name in bound_names(target)]
    return found


def second_meanings(path: Path) -> list[str]:
    """Names bound twice with different meanings: imported then assigned, defined twice, a value then a class..."""
    first: dict[str, tuple[str, int]] = {}
    clashes = []
    for name, kind, cell in top_level_bindings(path):
        if name in first and first[name][0] != kind or kind == "definition" and name in first:
            clashes.append(f"`{name}`: {first[name][0]} in code cell {first[name][1]}, {kind} in code cell {cell}")
        first.setdefault(name, (kind, cell))
    return clashes


def test_a_name_given_a_second_meaning_is_found(tmp_path):
    sources = ["import numpy as np\nx = 1", "x = 2\ndef f():\n    pass", "np = 3\ndef f():\n    pass"]
    notebook = {"cells": [{"cell_type": "code", "source": source} for source in sources]}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(notebook))
    assert second_meanings(path) == [
        "`np`: import in code cell 1, value in code cell 3",
        "`f`: definition in code cell 2, definition in code cell 3",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_rebinds_an_imported_module_function_or_class_to_something_else(path):
    """A name the notebook imports or defines keeps its meaning: values may change, what a name stands for may not."""
    clashes = second_meanings(path)
    assert not clashes, f"{path.name} gives a name a second meaning: " + "; ".join(clashes)


MARKDOWN_WORDS = 120  # the most a markdown cell's prose may hold: a longer one is split into cells read in turn


def prose_words(markdown: str) -> int:
    """The words of a markdown cell's prose: code blocks and table rows are not read as sentences."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return len(" ".join(line for line in text.splitlines() if not line.lstrip().startswith("|")).split())


def test_prose_words_leave_out_code_and_tables():
    assert prose_words("One two.\n\n```python\nx = 1\ny = 2\n```\n| a | b |\n|---|---|\nThree") == 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_markdown_cell_is_short(path):
    cells = json.loads(path.read_text())["cells"]
    long = {
        i: words
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "markdown" and (words := prose_words("".join(cell["source"]))) > MARKDOWN_WORDS
    }
    assert not long, f"{path.name}: markdown cells {long} (index: words) are over {MARKDOWN_WORDS} words: split each"
