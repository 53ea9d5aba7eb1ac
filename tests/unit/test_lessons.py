"""One record per lesson (course.lessons): every notebook has one and every record has its notebook, its
solutions, its exercise checks and a section of the budget. Fast: no Ray, no notebook runs."""

from __future__ import annotations

import ast
import importlib
import json
import re
import symtable
from dataclasses import fields
from pathlib import Path

import pytest
from executed import calls, exercise_checks

from course import config
from course.budget import SECTIONS, get_budget
from course.claims import Claim
from course.lessons import LESSONS, Lesson
from course.resources import plan_resources
from course.sources import Sources

ROOT = Path(__file__).resolve().parents[2]
ON_DISK = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))


def code_of(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def test_every_notebook_has_a_record_and_every_record_a_notebook():
    recorded = [lesson.notebook for lesson in LESSONS]
    unrecorded = sorted(set(ON_DISK) - set(recorded))
    assert not unrecorded, f"add a Lesson(notebook=...) record to course/lessons.py for {unrecorded}"
    missing = sorted(set(recorded) - set(ON_DISK))
    assert not missing, f"records without a notebook: add notebooks/<name>.ipynb or remove the record: {missing}"
    assert recorded == sorted(recorded), "course/lessons.py lists the lessons in the course's order"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_a_record_names_what_exists(lesson: Lesson):
    assert (ROOT / "solutions" / f"{lesson.notebook}.ipynb").exists(), f"add solutions/{lesson.notebook}.ipynb"
    assert {lesson.budget, *lesson.reads} <= set(SECTIONS), (
        f"{lesson.notebook}: budget={lesson.budget!r}, not in {list(SECTIONS)}"
    )
    shared = set(get_budget(kind="cpu").shared())
    assert set(lesson.shared) <= shared, f"{lesson.notebook}: shared={lesson.shared}, the shared fields are {shared}"
    sources = {field.name for field in fields(Sources)} - {"kind"}
    assert set(lesson.sources) <= sources, f"{lesson.notebook}: sources={lesson.sources}, fields of Sources: {sources}"
    assert lesson.headline.strip() and 0 < lesson.floor < 1, (
        f"{lesson.notebook}: a named headline, a floor above chance"
    )
    for kind in ("cpu", "gpu"):  # every budget fills its plan row
        budget = get_budget(kind=kind)
        assert lesson.plan(budget, plan_resources({"CPU": 8, "GPU": 2 if kind == "gpu" else 0}, budget)).strip()


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_a_lesson_s_exercises_are_its_module_s_checks_called_by_its_notebook(lesson: Lesson):
    module = importlib.import_module(lesson.exercises_module)
    source = Path(module.__file__).read_text()
    ids = sorted(set(re.findall(rf'"({re.escape(lesson.number)}\.\d)"', source)))
    assert ids == sorted(lesson.exercises), (
        f"{lesson.exercises_module} checks {ids}; the record says {lesson.exercises}"
    )
    code = code_of(ROOT / "notebooks" / f"{lesson.notebook}.ipynb")
    assert f"from course.exercises import {lesson.exercises_module.rsplit('.', 1)[1]} as exercises" in code
    checks = exercise_checks(ROOT / "notebooks" / f"{lesson.notebook}.ipynb")
    assert len(checks) == len(lesson.exercises), f"{lesson.notebook} calls {len(checks)} checks for {lesson.exercises}"


def module_names(code: str) -> set[str]:
    """The names a notebook's code binds at its top level (imports, functions, classes, assignments): those a later
    cell can use."""
    table = symtable.symtable(code, "lesson", "exec")
    return {symbol.get_name() for symbol in table.get_symbols() if symbol.is_assigned() or symbol.is_imported()}


def names_needed(code: str) -> set[str]:
    """The names a piece of code reads from its notebook's namespace: used at its top level or in its functions and
    classes, and bound by none of them."""
    needed: set[str] = set()

    def visit(table: symtable.SymbolTable) -> None:
        for symbol in table.get_symbols():
            if table.get_type() == "module":
                if symbol.is_referenced() and not (symbol.is_assigned() or symbol.is_imported()):
                    needed.add(symbol.get_name())
            elif symbol.is_referenced() and symbol.is_global():
                needed.add(symbol.get_name())
        for child in table.get_children():
            visit(child)

    visit(symtable.symtable(code, "answer", "exec"))
    return needed - module_names(code)


def test_names_needed_are_those_the_code_does_not_bind():
    answer = "import os\n\n\ndef f(x, *rest, **options):\n    g = lambda y: y + x\n    return g(tempfile, os)\n"
    assert names_needed(answer) == {"tempfile"}
    assert module_names("import os\nx = 1\n\n\ndef f():\n    hidden = 2\n") == {"os", "x", "f"}


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_a_solution_pasted_into_its_lesson_finds_every_name_it_uses(lesson: Lesson):
    """A learner who writes the solution's answer into the lesson's exercise cell must not meet a NameError: every name
    it reads is built in, bound at the top level of the lesson's code, or bound by the answer itself (seen in a walk:
    02b's answer needed `tempfile`, `Path` and `Checkpoint`, which only the solutions notebook imported)."""
    import builtins

    lesson_code = code_of(ROOT / "notebooks" / f"{lesson.notebook}.ipynb").replace("\n%", "\n# %")
    known = set(dir(builtins)) | module_names(lesson_code)
    cells = json.loads((ROOT / "solutions" / f"{lesson.notebook}.ipynb").read_text())["cells"]
    answers = ["".join(cell["source"]) for cell in cells if "exercises.check_" in "".join(cell["source"])]
    assert len(answers) == len(lesson.exercises)
    for answer in answers:
        missing = sorted(names_needed(answer) - known)
        assert not missing, (
            f"solutions/{lesson.notebook}: an answer uses {missing}, which the lesson never imports or makes: import "
            "them in the lesson's exercise cell (`# noqa: F401`, for your answer)"
        )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_a_notebook_describes_itself_by_its_own_name(lesson: Lesson):
    found_calls = calls(ROOT / "notebooks" / f"{lesson.notebook}.ipynb", "lessons.describe")
    assert found_calls or not lesson.sources, f"{lesson.notebook} reads {lesson.sources}, never calls lessons.describe"
    for call in found_calls:
        found = {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}.get("lesson")
        assert found == lesson.notebook, f"{lesson.notebook} describes itself as {found!r}"


def test_the_readme_s_lesson_table_and_the_browser_test_follow_the_records():
    readme = (ROOT / "README.md").read_text()
    for lesson in LESSONS:
        assert f"`{lesson.notebook}`" in readme, f"README's lesson table misses {lesson.notebook}"
    assert sum(not lesson.runs_in_browser for lesson in LESSONS) == 1, "one lesson (06) is tested by test_serve"


@pytest.mark.parametrize("lesson", [lesson for lesson in LESSONS if lesson.claims], ids=lambda lesson: lesson.notebook)
def test_a_lesson_s_claims_name_figures_its_notebook_records(lesson: Lesson):
    """tests/lessons/test_what_they_show.py holds each claim on the record; here, each names recorded figures."""
    records = calls(ROOT / "notebooks" / f"{lesson.notebook}.ipynb", "results.record")
    recorded = {keyword.arg for call in records for keyword in call.keywords}
    for claim in lesson.claims:
        named = {claim.larger, claim.smaller} - {None}
        assert named <= recorded, f"{lesson.notebook}: {claim} names {sorted(named - recorded)}, not recorded"
        assert claim.factor > 0 and (claim.factor >= 1 or claim.smaller), f"{lesson.notebook}: {claim}: no effect"


def test_a_claim_holds_on_figures_that_show_it_and_not_on_others():
    from course.claims import Claim

    faster = Claim("waits less", "before_s", 2.0, "after_s")
    assert faster.holds({"before_s": 1.0, "after_s": 0.4}) and not faster.holds({"before_s": 1.0, "after_s": 0.6})
    alone = Claim("at least twice as fast", "speedup", 2.0)
    assert alone.holds({"speedup": 2.5}) and not alone.holds({"speedup": 1.5})
    assert str(faster) == "waits less: before_s >= 2 x after_s"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_a_lesson_checks_and_builds_only_the_sources_its_record_names(lesson, tmp_path, monkeypatch):
    from course import build, lessons

    built = []

    def make(name: str, data_dir: Path, force: bool = False) -> Path:
        built.append(name)
        (data_dir / name).mkdir(parents=True, exist_ok=True)
        (data_dir / name / "labels.csv").touch()  # the dogs-vs-fish stand-in's labels are a file in its folder
        return data_dir / name

    monkeypatch.setattr(config, "DATA_DIR", tmp_path)
    monkeypatch.setattr(build, "build", make)
    monkeypatch.setattr(config, "IN_A_CLONE", True)
    if lesson.sources:  # in a clone, a stand-in not built is an error that says `make data`
        with pytest.raises(FileNotFoundError, match="make data"):
            lessons.require_sources(lesson.notebook)
    monkeypatch.setattr(config, "IN_A_CLONE", False)  # installed alone: what the lesson reads is built, once
    assert lessons.require_sources(lesson.notebook).kind == "standin"
    assert sorted(built) == sorted({build.FOR_SOURCE[source] for source in lesson.sources})
    assert set(lesson.sources) <= {field.name for field in fields(Sources)}


def test_a_lesson_whose_extra_module_is_missing_stops_first_with_the_install_command(monkeypatch):
    """05 imports XGBoost, an extra (`playbook`) a hosted runtime may lack: its first cell says what to install, before
    any data is looked at; the lessons that need nothing extra go on."""
    import importlib.util

    from course import lessons

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "xgboost" else real_find_spec(name))
    with pytest.raises(ModuleNotFoundError, match=r"imports xgboost.*`pip install xgboost`.*make setup"):
        lessons.require_packages(lessons.lesson_named("05_data_loading_playbook"))
    lessons.require_packages(lessons.lesson_named("04_cifar10_pytorch_to_ray"))  # nothing beyond the dependencies
    assert all(real_find_spec(name) for lesson in LESSONS for name in lesson.packages), "make setup installs them all"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_every_lesson_checks_its_own_sources_first(lesson):
    path = ROOT / "notebooks" / f"{lesson.notebook}.ipynb"
    found = calls(path, "lessons.require_sources")
    assert [ast.literal_eval(call.args[0]) for call in found] == [lesson.notebook], (
        f"{path.name}: its first cells call lessons.require_sources({lesson.notebook!r}) once (only the sources its "
        "record names are checked)"
    )
    assert not calls(path, "require_data"), f"{path.name}: require_data checks every source"


def is_timed(figure: str | None) -> bool:
    """A figure that is a time or a rate: what a speed-up compares."""
    return bool(figure) and bool(re.search(r"(?:^|_)m?s(?:_|$)|^throughput|^speedup$", figure))


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_every_speedup_says_what_it_times_and_a_waiting_one_says_it_sleeps(lesson: Lesson):
    """A speed-up claim names what it times (Claim.speedup_of); where sleeps stand for waits, the notebook's text
    says that they sleep, so that no learner reads four sleeping tasks as four times the computing."""
    markdown = " ".join(
        "".join(cell["source"])
        for cell in json.loads((config.REPO_ROOT / "notebooks" / f"{lesson.notebook}.ipynb").read_text())["cells"]
        if cell["cell_type"] == "markdown"
    )
    for claim in lesson.claims:
        timed = is_timed(claim.larger) or is_timed(claim.smaller)
        assert (claim.speedup_of is not None) == timed, f"{claim}: speedup_of={claim.speedup_of!r}"
        if claim.speedup_of == "waiting":
            assert re.search(r"\bsleep", markdown), f"{lesson.notebook}: {claim.says}: its text never says it sleeps"
        if claim.speedup_of == "start-up":  # what it times is the start-up, not the function: the text says so
            assert "start-up" in markdown, f"{lesson.notebook}: {claim.says}: its text never names the start-up"


def test_a_claim_refuses_a_kind_of_speedup_it_does_not_know():
    known = "not one of 'waiting', 'computing', 'start-up' or None"
    with pytest.raises(ValueError, match=f"speedup_of='sleeping', {known}"):
        Claim("x", "a_s", 2.0, "b_s", speedup_of="sleeping")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_a_speedup_of_local_mode_times_start_up(lesson: Lesson):
    """Local mode (``ScalingConfig(num_workers=0)``) runs the function in the calling process, and skips what a run on
    workers does before the function runs (course.claims.SPEEDUPS_OF): what it gains is start-up, not computing."""
    for claim in lesson.claims:
        local = any("local" in name and is_timed(name) for name in claim.figure_names())  # not local_shuffle_blocks
        assert (claim.speedup_of == "start-up") == local, f"{lesson.notebook}: {claim}: speedup_of={claim.speedup_of!r}"


def test_a_claim_names_what_its_speedup_times():
    start_up = Claim("local mode comes sooner", "workers_s", 3.0, "local_s", speedup_of="start-up")
    assert str(start_up) == "local mode comes sooner: workers_s >= 3 x local_s (times start-up)"
    assert str(Claim("more batches", "batches", 1.5, "loads")) == "more batches: batches >= 1.5 x loads"
    assert start_up.measured({"workers_s": 9.0, "local_s": 0.1}) == "workers_s = 90 x local_s"
