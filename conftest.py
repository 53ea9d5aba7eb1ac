"""pytest, for the whole repository. The tests are grouped by what they test (tests/unit, tests/exercises,
tests/cluster, tests/lessons, tests/browser, tests/site, tests/hosted); the modules they share are in tests/support,
importable by name (``from executed import ...``); the real-sources rehearsal, a plugin around nbmake's items, is
loaded here (tests/support/real_sources_rehearsal.py; `make test` runs it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "tests" / "support"))

pytest_plugins = ["real_sources_rehearsal"]
