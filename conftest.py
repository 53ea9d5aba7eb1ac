"""pytest, for the whole repository. The tests are grouped by what they test (tests/unit, tests/exercises,
tests/cluster, tests/lessons, tests/browser, tests/site, tests/hosted); the modules they share are in tests/support,
importable by name (``from executed import ...``); the real-sources rehearsal, a plugin around nbmake's items, is
loaded here (tests/support/real_sources_rehearsal.py; `make test` runs it)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "tests" / "support"))

pytest_plugins = ["real_sources_rehearsal"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``course_size`` runs where the tests run the notebooks at the course size (COURSE_TEST_SIZE=course,
    the weekly workflow); on every landing, at the smoke size, it is skipped, saying where it runs."""
    from course import settings

    if settings.read("COURSE_TEST_SIZE") == "course":
        return
    weekly = pytest.mark.skip(reason="at the course size only (COURSE_TEST_SIZE=course: the weekly workflow)")
    for item in items:
        if item.get_closest_marker("course_size"):
            item.add_marker(weekly)
