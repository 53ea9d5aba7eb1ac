"""Links built from the course's one declared repository URL (pyproject.toml, ``[project.urls] Repository``).

"Open in Colab" opens a lesson straight from the repository on GitHub. Where pyproject.toml declares no public
GitHub URL, there is nothing for Colab to open, and no link is printed anywhere (tests/unit/test_links.py keeps the
README's lesson table and each lesson's header in step with this module).
"""

from __future__ import annotations

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
