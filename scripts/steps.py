"""Each step of a long command timed, as one table: ``.ci/run`` ends with it (issue 69).

``python scripts/steps.py run NAME -- COMMAND...`` runs COMMAND and records one row, its name, when it started, how
long it took and its exit status, in :data:`STEPS` (COMMAND's status is this script's). A step inside another (the
browser test inside the first session) records its own row with :func:`record`. ``python scripts/steps.py table``
prints the rows in the order they started, each row inside another indented under it, with minutes;
``python scripts/steps.py clear`` starts a new table. Only the standard library: the table prints even where setup
failed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

STEPS = Path(__file__).resolve().parents[1] / "results" / "steps.tsv"


def record(name: str, started: float, seconds: float, status: int, steps: Path | None = None) -> None:
    """One row: ``name``, its start (epoch seconds), its length in seconds, its exit status."""
    steps = steps or STEPS
    steps.parent.mkdir(parents=True, exist_ok=True)
    with steps.open("a") as out:
        out.write(f"{name}\t{started:.1f}\t{seconds:.1f}\t{status}\n")


def rows(steps: Path | None = None) -> list[tuple[str, float, float, int]]:
    steps = steps or STEPS
    if not steps.exists():
        return []
    found = []
    for line in steps.read_text().splitlines():
        name, started, seconds, status = line.split("\t")
        found.append((name, float(started), float(seconds), int(status)))
    return sorted(found, key=lambda row: row[1])


def table(steps: Path | None = None) -> str:
    """The steps as a Markdown table, in the order they started; a step that ran inside another is indented."""
    lines = ["| step | minutes | status |", "|---|---:|---|"]
    open_steps: list[float] = []  # the ends of the steps the next one may lie inside
    total = 0.0
    for name, started, seconds, status in rows(steps):
        while open_steps and started >= open_steps[-1]:
            open_steps.pop()
        depth = len(open_steps)
        if depth == 0:
            total += seconds
        outcome = {0: "ok", 5: "no test selected"}.get(status, f"failed ({status})")  # 5: pytest's
        lines.append(f"| {'  ' * depth}{'└ ' if depth else ''}{name} | {seconds / 60:.1f} | {outcome} |")
        open_steps.append(started + seconds)
    lines.append(f"| all of it | {total / 60:.1f} | |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["table"]:
        print(table() if STEPS.exists() else "(no step recorded)")
        return 0
    if argv[:1] == ["clear"]:
        STEPS.unlink(missing_ok=True)
        return 0
    if len(argv) >= 4 and argv[0] == "run" and argv[2] == "--":
        started = time.time()
        status = subprocess.call(argv[3:])
        record(argv[1], started, time.time() - started, status)
        return status
    print("usage: steps.py run NAME -- COMMAND... | table | clear", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
