"""The paths and the settings as the course reads them (course.config); and the modules that hold the settings
(config, budget, sources, storage) import nothing that is built on them."""

import os
from pathlib import Path

import pytest
from python_source import parse

from course import budget, config, sources, storage


def test_the_makefile_reads_course_sources_as_python_does():
    import subprocess

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "COURSE_", "MAKE"))}  # as a fresh shell
    for value in ("", "standin", "Real", " REAL ", "real"):
        shown = subprocess.run(
            ["make", "-s", "-C", str(root), "sources", f"COURSE_SOURCES={value}"],
            capture_output=True,
            text=True,
            env=env,
        ).stdout
        kind = config.sources_kind(value or None)
        assert f"COURSE_SOURCES={kind} " in shown, (value, shown)
        assert ("HF_HUB_OFFLINE=1" in shown) == (kind != "real"), (value, shown)


def test_floors_are_enforced_unless_the_setting_says_report(monkeypatch):
    monkeypatch.delenv(config.FLOORS_ENV, raising=False)
    assert config.floors() == "enforce"
    monkeypatch.setenv(config.FLOORS_ENV, " Report ")
    assert config.floors() == "report"
    monkeypatch.setenv(config.FLOORS_ENV, "skip")
    with pytest.raises(ValueError, match="enforce.*report"):
        config.floors()


@pytest.mark.parametrize("module", [config, budget, sources, storage], ids=lambda module: module.__name__)
def test_the_settings_modules_do_not_import_the_lessons(module):
    """config -> lessons -> resources -> config was a circle; the lessons read the settings (config, budget, sources,
    storage), never the other way."""
    import ast

    tree = parse((Path(module.__file__)).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {f"course.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not imported & {"course.lessons", "course.resources", "course.results"}, imported
