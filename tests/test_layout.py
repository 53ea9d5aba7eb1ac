"""The layout of helpers: four layers in four folders, each importing only from the layers before it; the glossary
(the package docstring) and docs/development.md name every module; the real-data path never imports the tools."""

from __future__ import annotations

import ast
from pathlib import Path

import helpers
from helpers.course.lessons import LESSONS

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "helpers"
LAYERS = ("course", "pipeline", "exercises", "tools")  # each may import from the layers before it, never after
MAY_IMPORT = {
    "course": {"course"},
    "pipeline": {"course", "pipeline"},
    "exercises": {"course", "pipeline", "exercises"},
}
MAY_IMPORT["tools"] = {"course", "pipeline", "tools"}  # the tools build and measure; they never check exercises
MODULES = sorted(
    ".".join(p.relative_to(HELPERS).with_suffix("").parts)
    for p in HELPERS.glob("*/*.py")
    if p.stem != "__init__" and p.parent.name != "metric_scripts"
)


def imports(path: Path) -> set[str]:
    """Every ``helpers...`` module that ``path`` imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("helpers.")}


def test_every_module_is_in_a_layer_s_folder():
    loose = sorted(p.name for p in HELPERS.glob("*.py") if p.stem != "__init__")
    assert not loose, f"put {loose} in one of helpers/{{{','.join(LAYERS)}}}/"
    folders = sorted(p.name for p in HELPERS.iterdir() if p.is_dir() and any(p.glob("*.py")))  # not caches
    assert folders == sorted(LAYERS), folders


def test_no_layer_imports_a_later_one():
    upward = []
    for path in HELPERS.glob("*/**/*.py"):
        layer = path.relative_to(HELPERS).parts[0]
        for name in imports(path):
            target = name.split(".")[1]
            if target in LAYERS and target not in MAY_IMPORT[layer]:
                upward.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not upward, "imports against the layers (course, pipeline, exercises, tools):\n" + "\n".join(upward)


def test_the_glossary_names_every_module_and_nothing_else():
    rows = {line.split()[0] for line in helpers.__doc__.splitlines() if line[:1].isalpha() and line.split()}
    lesson_checks = {m for m in MODULES if m.startswith("exercises.") and m not in rows}  # exercises.<lesson>
    of_lessons = {lesson.exercises_module.removeprefix("helpers.") for lesson in LESSONS}
    assert lesson_checks <= of_lessons, f"not a lesson's checks, and not in the glossary: {lesson_checks - of_lessons}"
    missing = set(MODULES) - rows - lesson_checks
    assert not missing, f"helpers/__init__.py's glossary misses {sorted(missing)}"
    named = {row for row in rows if "." in row and "<" not in row}
    assert named <= set(MODULES), f"the glossary names modules that do not exist: {sorted(named - set(MODULES))}"


def test_the_layout_section_names_every_layer_and_module():
    layout = (ROOT / "docs" / "development.md").read_text()
    missing = [name for name in MODULES if f"`{name.split('.')[-1]}`" not in layout and not name.startswith("exer")]
    missing += [f"helpers/{layer}/" for layer in LAYERS if f"`helpers/{layer}/`" not in layout]
    assert not missing, f"docs/development.md's layout section misses {missing}"


def test_the_real_data_path_does_not_import_the_stand_in_generator():
    for path in (HELPERS / "pipeline").glob("*.py"):
        assert "helpers.tools.synthetic" not in imports(path), f"{path.name} imports the stand-in generator"
