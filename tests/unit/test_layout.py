"""The layout of the course's code: ``helpers``, what the lessons teach from, small and flat, one module per stage;
``course``, the machinery, in two layers (what ``helpers`` stands on, and what is built on ``helpers``). Each package's
glossary (its docstring) and docs/development.md name every module; the real-data path never imports the stand-ins;
no module of ``course``, ``helpers`` or ``scripts`` is over 450 lines (one concern each)."""

from __future__ import annotations

import ast
from pathlib import Path

from python_source import parse

import course
import helpers
from course.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[2]
HELPERS, COURSE, SCRIPTS = ROOT / "helpers", ROOT / "course", ROOT / "scripts"
EXERCISES = COURSE / "exercises"
# The machinery built on helpers; every other module of `course` is what helpers stands on, and never imports it.
BUILT_ON_HELPERS = {"serving", "standins", "build", "benchmark", "exercises"}
# the settings, the sources, the storage and the hardware, and the one module that reaches into the libraries'
# internals (course.internals, which imports nothing of the course); nothing else of course
HELPERS_MAY_IMPORT = {"course.config", "course.sources", "course.storage", "course.resources", "course.internals"}
HELPERS_MAX_LINES = 1200  # "on the order of a thousand lines" (issue 42)
MODULE_MAX_LINES = 450  # a module that grows past it holds more than one concern: split it by concern


def modules(package: Path) -> list[str]:
    """The dotted names of a package's modules, relative to it (``exercises.checking``), without ``__init__``."""
    return sorted(
        ".".join(p.relative_to(package).with_suffix("").parts)
        for p in package.rglob("*.py")
        if p.stem != "__init__" and "metric_scripts" not in p.parts and "__pycache__" not in p.parts
    )


def imports(path: Path) -> set[str]:
    """Every module of the course's two packages that ``path`` imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] in ("helpers", "course") and "." in name}


def glossary_rows(package) -> set[str]:
    """The first word of each row of the table in a package's docstring (between its second and third ``===`` rules)."""
    lines = package.__doc__.splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("====")]
    return {line.split()[0] for line in lines[rules[1] + 1 : rules[2]] if line[:1].isalpha()}


def test_helpers_is_small_and_flat():
    folders = sorted(p.name for p in HELPERS.iterdir() if p.is_dir() and any(p.glob("*.py")))  # not caches
    assert folders == ["metric_scripts"], f"helpers holds one module per stage, no packages: {folders}"
    lines = sum(len(p.read_text().splitlines()) for p in HELPERS.rglob("*.py"))
    assert lines <= HELPERS_MAX_LINES, f"helpers has {lines} lines: move what no lesson teaches from to course/"


def test_helpers_reads_only_the_settings_and_the_hardware_of_course():
    against = [
        f"helpers/{path.name} imports {name}"
        for path in HELPERS.glob("*.py")
        for name in imports(path)
        if name.startswith("course.") and not any(name.startswith(allowed) for allowed in HELPERS_MAY_IMPORT)
    ]
    assert not against, "helpers may import only " + ", ".join(sorted(HELPERS_MAY_IMPORT)) + ":\n" + "\n".join(against)


def test_what_helpers_stands_on_never_imports_helpers():
    against = [
        f"course/{path.relative_to(COURSE)} imports {name}"
        for path in COURSE.rglob("*.py")
        if path.relative_to(COURSE).parts[0].removesuffix(".py") not in BUILT_ON_HELPERS
        for name in imports(path)
        if name.startswith("helpers.")
    ]
    assert not against, "a cycle through helpers:\n" + "\n".join(against)


def test_each_glossary_names_every_module_and_nothing_else():
    for package, folder in ((helpers, HELPERS), (course, COURSE)):
        rows, names = glossary_rows(package), modules(folder)
        lesson_checks = {m for m in names if m.startswith("exercises.") and m not in rows}  # exercises.<lesson>
        of_lessons = {lesson.exercises_module.removeprefix("course.") for lesson in LESSONS}
        assert lesson_checks <= of_lessons, f"not a lesson's checks, and not in the glossary: {lesson_checks}"
        missing = set(names) - rows - lesson_checks
        assert not missing, f"{package.__name__}/__init__.py's glossary misses {sorted(missing)}"
        named = {row for row in rows if "<" not in row}
        assert named <= set(names), (
            f"{package.__name__}'s glossary names modules that do not exist: {named - set(names)}"
        )


def test_the_layout_section_names_every_module():
    layout = (ROOT / "docs" / "development.md").read_text()
    missing = [
        f"{package}/{name}"
        for package, folder in (("helpers", HELPERS), ("course", COURSE))
        for name in modules(folder)
        if name in glossary_rows(course) | glossary_rows(helpers)  # not each exercises.<lesson>
        and f"`{name.split('.')[-1]}`" not in layout
    ]
    missing += [folder for folder in ("`helpers/`", "`course/`", "`course/exercises/`") if folder not in layout]
    assert not missing, f"docs/development.md's layout section misses {missing}"
    own_line = [name for name in modules(COURSE) if "." not in name and f"\n- `{name}`: " not in layout]
    assert not own_line, f"docs/development.md's `course/`, module by module, has no line for {own_line}"


def python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def over_the_limit(paths: list[Path]) -> list[str]:
    lines = {path: len(path.read_text().splitlines()) for path in paths}
    return [f"{path.relative_to(ROOT)}: {n} lines" for path, n in lines.items() if n > MODULE_MAX_LINES]


def test_no_module_of_course_helpers_or_scripts_is_over_450_lines():
    """One concern per module (docs/development.md, "Repository layout"); the exercises' checks have their own test."""
    paths = [p for folder in (COURSE, HELPERS, SCRIPTS) for p in python_files(folder) if EXERCISES not in p.parents]
    long = over_the_limit(paths)
    assert not long, f"over {MODULE_MAX_LINES} lines, split by concern:\n" + "\n".join(long)


def test_no_module_of_the_exercises_checks_is_over_450_lines():
    long = over_the_limit(python_files(EXERCISES))
    assert not long, f"over {MODULE_MAX_LINES} lines, split by concern (course/exercises/):\n" + "\n".join(long)


def test_the_real_data_path_does_not_import_the_stand_in_generator():
    for path in HELPERS.glob("*.py"):
        assert "course.standins" not in imports(path), f"{path.name} imports the stand-in generator"


def test_no_private_name_is_imported_from_another_module():
    """Between the course's modules, and from tests and scripts, only public names: an underscore name is the
    module's own (issue 42)."""
    private = []
    for path in [*python_files(HELPERS), *python_files(COURSE), *python_files(SCRIPTS)]:
        for node in ast.walk(parse(path.read_text())):
            own = ("helpers", "course", "doctor_checks")
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in own:
                private += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names if a.name[0] == "_"]
    assert not private, "import public names only:\n" + "\n".join(private)
