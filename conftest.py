"""pytest, for the whole repository: the tests' own modules (tests/) can be imported, and the real-sources rehearsal,
a plugin around nbmake's items, is loaded (tests/real_sources_rehearsal.py; `make test` runs it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "tests"))

pytest_plugins = ["real_sources_rehearsal"]
