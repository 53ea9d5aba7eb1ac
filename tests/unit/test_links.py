"""The "Open in Colab" links follow the one repository URL that pyproject.toml declares (course.links): in the README's
lesson table and in each lesson's header, built from it; where none is declared, no link anywhere."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from course import links
from course.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[2]


def test_a_colab_link_is_built_from_a_public_github_url_only(tmp_path):
    url = links.colab_url("03_ray_data", "https://github.com/someone/vit-ray-course.git")
    assert url == (
        "https://colab.research.google.com/github/someone/vit-ray-course/blob/main/notebooks/03_ray_data.ipynb"
    )
    assert links.colab_url("03_ray_data", "https://gitlab.example.com/someone/course") is None
    assert links.colab_url("03_ray_data", None) is None and links.colab_badge("03_ray_data", None) == ""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n[project.urls]\nRepository = "https://github.com/a/b"\n')
    assert links.repository_url(pyproject) == "https://github.com/a/b"
    pyproject.write_text('[project]\nname = "x"\n')
    assert links.repository_url(pyproject) is None


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_each_lesson_links_to_colab_exactly_where_a_url_is_declared(lesson):
    badge = links.colab_badge(lesson.notebook, links.repository_url())
    cells = json.loads((ROOT / "notebooks" / f"{lesson.notebook}.ipynb").read_text())["cells"]
    header = "".join(cells[0]["source"])
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if f"`{lesson.notebook}`" in line)
    if badge:
        assert badge in header, f"{lesson.notebook}: its first cell lacks {badge}"
        assert badge in row, f"README.md's row of {lesson.notebook} lacks {badge}"
    else:  # no public URL declared: nothing for Colab to open
        assert "colab.research.google.com" not in header + row, f"{lesson.notebook}: a Colab link with no URL declared"


def test_the_install_cell_installs_from_the_declared_url_or_the_setting_and_only_where_the_course_is_missing():
    declared = links.install_cell("https://github.com/someone/vit-ray-course")
    assert '"vit-ray-course @ git+https://github.com/someone/vit-ray-course"' in declared
    assert 'os.environ.get("COURSE_PACKAGE")' in declared and 'find_spec("course") is None' in declared
    assert '"pip", "install", "--quiet", "--python", sys.executable]' in declared  # uv, into the kernel's Python
    assert "--upgrade" not in declared  # what the runtime has installed stays as it is
    undeclared = links.install_cell(None)
    assert 'or ""' in undeclared and "Set COURSE_PACKAGE" in undeclared
    compile(declared, "install cell", "exec")  # plain Python, before the course can be imported


def test_the_install_cell_asks_for_a_source_where_none_is_declared_and_does_nothing_where_the_course_is(monkeypatch):
    monkeypatch.delenv("COURSE_PACKAGE", raising=False)
    ran = []
    monkeypatch.setattr("subprocess.run", lambda *args, **kwargs: ran.append(args))
    exec(links.install_cell(None), {})  # the course is installed here: nothing to do
    assert ran == []
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)  # as on a hosted runtime
    with pytest.raises(RuntimeError, match="Set COURSE_PACKAGE to a checkout's path or a git URL"):
        exec(links.install_cell(None), {})
    monkeypatch.setenv("COURSE_PACKAGE", "/some/checkout")
    succeeds = lambda code: lambda *args, **kwargs: ran.append(args) or subprocess.CompletedProcess(args, code)  # noqa: E731
    monkeypatch.setattr("subprocess.run", succeeds(0))
    exec(links.install_cell(None), {})  # uv first (installed with pip where the runtime lacks it: find_spec says so)
    assert [command[0][2:4] for command in ran] == [["pip", "install"], ["uv", "pip"]]
    assert ran[0][0][-1] == "uv" and ran[1][0][-1] == "/some/checkout"
    ran.clear()
    monkeypatch.setattr("subprocess.run", succeeds(2))
    exec(links.install_cell(None), {})  # uv fails: pip installs the course
    assert [command[0][2:4] for command in ran] == [["pip", "install"], ["uv", "pip"], ["pip", "install"]]
    assert ran[-1][0][-2:] == ["--quiet", "/some/checkout"]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.notebook)
def test_each_lesson_s_first_code_cell_is_the_install_cell_of_the_declared_url(lesson):
    cells = json.loads((ROOT / "notebooks" / f"{lesson.notebook}.ipynb").read_text())["cells"]
    first = next(cell for cell in cells if cell["cell_type"] == "code")
    assert "".join(first["source"]) == links.install_cell(links.repository_url()), (
        f"{lesson.notebook}: its first code cell is not the install cell: run `python -m course.links`"
    )
