"""The table of steps `.ci/run` ends with (scripts/steps.py): rows in the order they started, a step inside another
indented under it and left out of the total, each row's status said."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import steps  # noqa: E402  (scripts/ is not a package)


def test_the_table_nests_a_step_inside_the_one_it_ran_in_and_totals_the_outer_ones(tmp_path):
    rows = tmp_path / "steps.tsv"
    steps.record("the first session", 100.0, 600.0, 0, rows)
    steps.record("setup and data", 0.0, 90.0, 0, rows)  # recorded later, started first
    steps.record("its browser test", 200.0, 300.0, 1, rows)  # inside the first session
    steps.record("the site", 700.0, 30.0, 5, rows)
    lines = steps.table(rows).splitlines()
    names = [line.split("|")[1] for line in lines[2:]]
    assert names == [" setup and data ", " the first session ", "   └ its browser test ", " the site ", " all of it "]
    assert "| 1.5 | ok |" in lines[2] and "failed (1)" in lines[4] and "no test selected" in lines[5]
    assert lines[-1] == "| all of it | 12.0 | |"  # 90 + 600 + 30 s: the browser test is inside the first session


def test_a_step_run_through_the_script_keeps_its_command_status(tmp_path, monkeypatch):
    monkeypatch.setattr(steps, "STEPS", tmp_path / "steps.tsv")
    assert steps.main(["run", "fails", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert steps.main(["run", "passes", "--", sys.executable, "-c", "pass"]) == 0
    assert [(name, status) for name, _, _, status in steps.rows(steps.STEPS)] == [("fails", 3), ("passes", 0)]
    assert steps.main(["clear"]) == 0 and not steps.STEPS.exists()
