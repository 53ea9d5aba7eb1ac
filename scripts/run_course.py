"""Execute every course notebook in order into results/executed/ and print a summary table.

Run by `make run` inside a local Ray cluster (scripts/with-ray-cluster.sh). Whatever happens in a
notebook (a failing cell, a cell that runs past its time limit, a kernel that dies), the executed
copy is saved, the table is printed, and the exit code says whether every notebook passed. While a
notebook runs, a progress line says which cell it is in and for how long it has been running.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_runtime_dir
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from traitlets import default

from course import config, results, settings
from course.claims import SPEEDUPS_OF
from course.deadline import first_line
from course.lessons import LESSONS, Lesson

NOTEBOOKS = config.REPO_ROOT / "notebooks"
EXECUTED = config.RESULTS_DIR / "executed"
CELL_TIMEOUT = settings.number("COURSE_CELL_TIMEOUT")  # seconds one cell may run (1800 unless set)
# Left out of the kernel's environment: under pytest's marker, ipykernel does not put what the process's C++ code and
# child processes write to its stderr into the notebook, as it does in JupyterLab; a test then sees less than a learner.
NOT_FOR_THE_KERNEL = ("PYTEST_CURRENT_TEST",)


def kernel_env() -> dict[str, str]:
    """The environment a notebook's kernel starts with: this process's, less :data:`NOT_FOR_THE_KERNEL`."""
    return {name: value for name, value in os.environ.items() if name not in NOT_FOR_THE_KERNEL}


class IpcKernelManager(AsyncKernelManager):
    """A notebook's kernel over IPC: Unix sockets in Jupyter's runtime folder, removed when the kernel stops. Its five
    channels open no TCP port, so ipykernel does not warn that its ports carry everything unencrypted (`make lab` does
    the same: jupyter-config/jupyter_server_config.json). The one TCP port an ipykernel always opens is on 127.0.0.1:
    the pipe that brings the output of processes it forks back to the notebook."""

    @default("transport")
    def _transport_default(self) -> str:
        return "ipc"

    @default("connection_file")
    def _connection_file_default(self) -> str:
        folder = Path(jupyter_runtime_dir())
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / f"kernel-course-{uuid.uuid4().hex[:12]}.json")  # short: a socket's path has a limit


@dataclass
class Outcome:
    notebook: str
    seconds: float
    status: str  # "ok", or what went wrong and in which cell

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Progress:
    """One line per notebook that says `cell i of N, elapsed`: rewritten in place on a terminal."""

    def __init__(self, name: str, cells: int, before_cell: Callable[[str], None] | None = None) -> None:
        self.name, self.cells, self.start = name, cells, time.perf_counter()
        self.before_cell = before_cell  # called with each code cell's source before it runs (tests look in there)
        self.done = 0
        self.tty = sys.stdout.isatty()

    def cell_started(self, cell, cell_index: int, **_) -> None:  # nbclient's on_cell_execute hook
        if cell.cell_type != "code":
            return
        if self.before_cell is not None:
            self.before_cell(cell.source)
        self.done += 1
        line = f"  {self.name}: cell {self.done} of {self.cells}, {time.perf_counter() - self.start:.0f} s"
        print(f"\r{line:<70}" if self.tty else line, end="" if self.tty else "\n", flush=True)

    def finish(self) -> None:
        if self.tty:
            print(flush=True)


def execute(
    path: Path,
    executed_dir: Path,
    cell_timeout: int = CELL_TIMEOUT,
    before_cell: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    """Run one notebook with its own folder as working directory; always save the executed copy.

    ``before_cell(source)`` runs before each code cell (a test uses it to look at a service while it runs); ``env``
    adds to the kernel's environment (the tests' size, ``COURSE_SMOKE``)."""
    notebook = nbformat.read(path, as_version=4)
    code_cells = sum(cell.cell_type == "code" for cell in notebook.cells)
    progress = Progress(path.stem, code_cells, before_cell)
    client = NotebookClient(
        notebook,
        timeout=cell_timeout,
        kernel_name="python3",
        kernel_manager_class=IpcKernelManager,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.on_cell_execute = progress.cell_started
    start = time.perf_counter()
    status = "ok"
    try:
        client.execute(env=kernel_env() | dict(env or {}))
    except CellTimeoutError:
        status = f"TIMED OUT in cell {progress.done} of {code_cells} (limit {cell_timeout} s per cell)"
    except DeadKernelError:
        status = f"KERNEL DIED in cell {progress.done} of {code_cells} (out of memory?)"
    except CellExecutionError as error:
        last = re.sub(r"\x1b\[[0-9;]*m", "", str(error).strip().splitlines()[-1])[:80]  # no terminal colours
        status = f"FAILED in cell {progress.done} of {code_cells}: {last}"
    except Exception as error:  # the kernel would not start, or nbclient itself failed: still a row
        status = f"ERROR: {first_line(error, 80)}"
    finally:
        progress.finish()
        executed_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, executed_dir / path.name)
    return Outcome(path.name, time.perf_counter() - start, status)


def table(outcomes: list[Outcome], recorded: dict[str, dict]) -> str:
    """One row per notebook: wall time, its headline figure by name (with the floor it passed), status."""
    rows = []
    for outcome in outcomes:
        figure = recorded.get(outcome.notebook, {})
        headline = f"{figure['headline']} {figure['value']:.3f} (floor {figure['floor']})" if figure else "-"
        rows.append((outcome.notebook, f"{outcome.seconds:.0f}s", headline, outcome.status))
    width = max(len("headline"), *(len(row[2]) for row in rows)) if rows else len("headline")
    lines = [f"{'notebook':<34} {'wall time':>9}  {'headline':<{width}}  status"]
    lines += [f"{name:<34} {seconds:>9}  {headline:<{width}}  {status}" for name, seconds, headline, status in rows]
    return "\n".join(lines)


def claims_report(recorded: dict[str, dict], lessons: Sequence[Lesson] = LESSONS) -> tuple[str, bool]:
    """Each claim (course.claims.Claim) of the lessons that ran at the course size, on the figures they recorded: a
    line each (those that fail first, then those that hold, with what the run measured, then those not measured),
    then what each kind of speed-up among them times (course.claims.SPEEDUPS_OF); and whether every one held. The
    smoke size's measurements are too small to show their point."""
    failed, held, not_measured, kinds = [], [], [], []
    for lesson in lessons:
        record = recorded.get(f"{lesson.notebook}.ipynb") or {}
        if not lesson.claims or record.get("run", {}).get("size") != "course":
            continue
        for claim in lesson.claims:
            where = claim.not_measured(record["figures"])
            if where:
                not_measured.append(f"  not measured: {lesson.notebook}: {claim} ({where})")
                continue
            if claim.speedup_of and claim.speedup_of not in kinds:
                kinds.append(claim.speedup_of)
            why = claim.problem(record["figures"])
            if why:
                failed.append(f"  does not hold: {lesson.notebook}: {claim} ({why})")
            else:
                held.append(f"  holds: {lesson.notebook}: {claim}; measured {claim.measured(record['figures'])}")
    checked = len(failed) + len(held)
    if not checked:
        return "\n".join(["claims: none checked (no lesson with claims ran at the course size)", *not_measured]), True
    head = f"claims: {len(held)} of {checked} hold (course.lessons)"
    timed = ["what the speed-ups time:", *(f"  {kind}: {SPEEDUPS_OF[kind]}" for kind in kinds)] if kinds else []
    return "\n".join([head, *failed, *held, *not_measured, *timed]), not failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: every lesson's, in order)")
    parser.add_argument("--executed", type=Path, default=EXECUTED, help="where the executed copies go")
    parser.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT, help="seconds one cell may run")
    args = parser.parse_args(argv)
    paths = args.notebooks or [NOTEBOOKS / f"{lesson.notebook}.ipynb" for lesson in LESSONS]

    outcomes, recorded = [], {}
    interrupted = False
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        results.metrics_path(path.stem).unlink(missing_ok=True)  # no stale figures from an earlier run
        try:
            outcome = execute(path, args.executed, args.cell_timeout)
        except KeyboardInterrupt:  # Ctrl-C: the table of what ran so far, then stop
            outcome, interrupted = Outcome(path.name, 0.0, "INTERRUPTED (Ctrl-C)"), True
        recorded[path.name] = results.read(path.stem)
        outcomes.append(outcome)
        print(f"  {outcome.status} in {outcome.seconds:.0f} s", flush=True)
        if interrupted:
            break
    print(f"\nexecuted notebooks are in {args.executed}\n")
    print(table(outcomes, recorded))
    report, held = claims_report(recorded)
    print(f"\n{report}")
    if interrupted:
        return 130
    return 0 if held and all(outcome.ok for outcome in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
