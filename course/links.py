"""What is built from the course's one declared repository URL (pyproject.toml, ``[project.urls] Repository``).

"Open in Colab" opens a lesson straight from the repository on GitHub. Where pyproject.toml declares no public
GitHub URL, there is nothing for Colab to open, and no link is printed anywhere (tests/unit/test_links.py keeps the
README's lesson table and each lesson's header in step with this module). Each lesson's install cell, its first code
cell, installs the course from the same URL where the course is missing (COURSE_PACKAGE overrides it).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from course.config import REPO_ROOT

GITHUB = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/?$")
COLAB = "https://colab.research.google.com/github/{owner}/{name}/blob/{branch}/notebooks/{notebook}.ipynb"
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"


def repository_url(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str | None:
    """The ``Repository`` URL that ``pyproject`` declares under ``[project.urls]``, or None."""
    urls = tomllib.loads(pyproject.read_text()).get("project", {}).get("urls", {})
    return urls.get("Repository")


def colab_url(notebook: str, repository: str | None, branch: str = "main") -> str | None:
    """Where Colab opens ``notebook`` ("03_ray_data") from ``repository``; None if it is not a public GitHub URL."""
    found = GITHUB.match(repository or "")
    return COLAB.format(branch=branch, notebook=notebook, **found.groupdict()) if found else None


def colab_badge(notebook: str, repository: str | None) -> str:
    """The markdown of an "Open in Colab" badge for ``notebook``, or "" where there is no URL to open it from."""
    url = colab_url(notebook, repository)
    return f"[![Open in Colab]({BADGE})]({url})" if url else ""


# A lesson's first code cell (notebooks/*.ipynb): the course's package, installed where it is missing. It runs before
# the course can be imported, so it is plain Python; `python -m course.links` writes it into every lesson from
# :func:`install_cell`, and tests/unit/test_links.py keeps the two in step.
INSTALL_CELL = """\
# Run this cell first. In a clone of the course (after `make setup`) it does nothing. In a notebook opened on its own
# (Colab, Kaggle, a Jupyter of your own) it installs the course's package with uv, in seconds where pip takes a minute
# or more, and leaves the torch, transformers, datasets and accelerate already installed as they are; the next cell
# builds what data the lesson reads.
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("course") is None:
    package = os.environ.get("COURSE_PACKAGE") or {default}  # a checkout's path, a git URL, a version
    if not package:
        raise RuntimeError(
            "The course is not installed, and this lesson names no repository to install it from. Set COURSE_PACKAGE "
            "to a checkout's path or a git URL (os.environ['COURSE_PACKAGE'] = 'git+https://...'), or open the "
            "lesson from a clone of the course after `make setup`."
        )
    print(f"installing the course from {{package}} (seconds to a minute, once)")
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    if importlib.util.find_spec("uv") is None:
        subprocess.run([*pip, "uv"], check=True)  # one small wheel: uv resolves and downloads in parallel
    uv = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", sys.executable]
    if subprocess.run([*uv, package]).returncode != 0:
        subprocess.run([*pip, package], check=True)  # where uv cannot (an index only pip's own settings name)
    importlib.invalidate_caches()  # this kernel finds the package just installed"""
FIRST_LINE = INSTALL_CELL.split("\n", 1)[0]  # how the cell is found again


def package_source(repository: str | None) -> str:
    """What pip installs the course from by default: ``vit-ray-course @ git+<repository>``, or "" where none is
    declared (then COURSE_PACKAGE must say)."""
    return f"vit-ray-course @ git+{repository.removesuffix('/')}" if repository else ""


def install_cell(repository: str | None) -> str:
    """The source of every lesson's first code cell, installing from ``repository`` unless COURSE_PACKAGE says."""
    return INSTALL_CELL.format(default=json.dumps(package_source(repository)))


def write_install_cells(folder: Path = REPO_ROOT / "notebooks", repository: str | None = None) -> list[Path]:
    """Put :func:`install_cell` into every lesson of ``folder`` as its first code cell (replacing an older one);
    the lessons it changed."""
    import nbformat

    source = install_cell(repository if repository is not None else repository_url())
    changed = []
    for path in sorted(folder.glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        first = next(i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code")
        if notebook.cells[first].source == source:
            continue
        if notebook.cells[first].source.startswith(FIRST_LINE):
            notebook.cells[first].source = source
        else:
            notebook.cells.insert(first, nbformat.v4.new_code_cell(source))
        nbformat.write(notebook, path)
        changed.append(path)
    return changed


if __name__ == "__main__":  # python -m course.links: after changing [project.urls] Repository in pyproject.toml
    for written in write_install_cells():
        print(f"wrote the install cell of {written.relative_to(REPO_ROOT)}")
