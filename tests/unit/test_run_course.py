"""`make run` always ends with its table: a failing cell, a cell past its time limit and a dead kernel
are each a row that says so, the executed copy is saved, and the exit code is non-zero."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import run_course  # noqa: E402  (scripts/ is not a package)

from course import claims, lessons  # noqa: E402

# per cell: a_ok's imports and git calls take about a second on a quiet machine, many on a busy one; c_too_slow's
# sleep far longer
CELL_TIMEOUT_S = "20"
CASES = {
    "a_ok": "from course import lessons, results\n"
    "toy = lessons.Lesson('a_ok', 'a toy', 'toy accuracy', floor=0.5, exercises=(), budget='beans')\n"
    "results.record('a_ok', 0.9, lesson=toy)",
    "b_fails": "raise ValueError('a broken cell')",
    "c_too_slow": "import time\ntime.sleep(600)",
    "d_kernel_dies": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
    # the kernel's own connection: IPC, so its channels open no TCP port
    "e_transport": "import json, ipykernel.connect as c\nprint(json.load(open(c.get_connection_file()))['transport'])",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    folder = tmp_path_factory.mktemp("notebooks")
    for name, code in CASES.items():
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(code)])
        nbformat.write(notebook, folder / f"{name}.ipynb")
    executed = folder / "executed"
    command = [
        sys.executable,
        str(ROOT / "scripts" / "run_course.py"),
        "--executed",
        str(executed),
        "--cell-timeout",
        CELL_TIMEOUT_S,
    ]
    runtime = folder / "jupyter-runtime"  # where the kernels' connection files and IPC sockets go
    env = {**os.environ, "COURSE_RESULTS_DIR": str(folder / "results"), "JUPYTER_RUNTIME_DIR": str(runtime)}
    result = subprocess.run(
        command + sorted(str(p) for p in folder.glob("*.ipynb")), capture_output=True, text=True, timeout=300, env=env
    )
    return result, executed, runtime


def row(result: subprocess.CompletedProcess, name: str) -> str:
    return next(line for line in result.stdout.splitlines() if line.startswith(f"{name}.ipynb "))


def test_every_notebook_gets_a_row_and_a_saved_copy(run):
    result, executed, _ = run
    assert result.returncode == 1, result.stdout + result.stderr
    for name in CASES:
        assert (executed / f"{name}.ipynb").exists()
        row(result, name)


def test_each_kind_of_failure_says_what_happened(run):
    result, _, _ = run
    assert row(result, "a_ok").endswith("ok")
    assert "toy accuracy 0.900 (floor 0.5)" in row(result, "a_ok"), "the table names each notebook's headline"
    assert "FAILED in cell 2 of 2: ValueError: a broken cell" in row(result, "b_fails")
    assert "TIMED OUT in cell 2 of 2" in row(result, "c_too_slow")
    assert "KERNEL DIED in cell 2 of 2" in row(result, "d_kernel_dies")


def test_progress_names_the_cell(run):
    result, _, _ = run
    assert "c_too_slow: cell 2 of 2," in result.stdout


def test_kernels_run_over_ipc_without_a_warning_and_leave_no_sockets(run):
    result, executed, runtime = run
    transport = nbformat.read(executed / "e_transport.ipynb", as_version=4).cells[1].outputs[0].text.strip()
    assert transport == "ipc", "the kernel was started over TCP: five ports, and ipykernel's warning"
    assert "running over TCP" not in result.stdout + result.stderr
    assert not [p.name for p in runtime.glob("kernel-*")], "a kernel's connection file or socket was left behind"


def test_make_run_ends_with_the_claims_of_the_lessons_that_ran_at_the_course_size():
    toy = lessons.Lesson(
        "a_toy",
        "a toy",
        "toy accuracy",
        floor=0.5,
        exercises=(),
        budget="beans",
        claims=(claims.Claim("tasks beat the loop", "speedup", 1.5), claims.Claim("b is larger", "b", 2.0, "a")),
    )
    course = {"run": {"size": "course"}}
    report, held = run_course.claims_report(
        {"a_toy.ipynb": course | {"figures": {"speedup": 3.0, "a": 1.0, "b": 2.5}}}, [toy]
    )
    assert held and report.startswith("claims: 2 of 2 hold")
    report, held = run_course.claims_report({"a_toy.ipynb": course | {"figures": {"speedup": 1.4, "a": 1.0}}}, [toy])
    assert not held and "claims: 0 of 2 hold" in report
    assert "does not hold: a_toy: tasks beat the loop: speedup >= 1.5" in report
    assert "it recorded no b" in report
    one_node = dataclasses.replace(toy, claims=(*toy.claims, claims.Claim("c", "c", 1.0, absent_where="on one node")))
    report, held = run_course.claims_report(
        {"a_toy.ipynb": course | {"figures": {"speedup": 3.0, "a": 1, "b": 3}}}, [one_node]
    )
    assert held and report.splitlines() == [
        "claims: 2 of 2 hold (course.lessons)",
        "  holds: a_toy: tasks beat the loop: speedup >= 1.5; measured speedup = 3",
        "  holds: a_toy: b is larger: b >= 2 x a; measured b = 3 x a",
        "  not measured: a_toy: c: c >= 1 (on one node)",
    ]
    report, held = run_course.claims_report(
        {"a_toy.ipynb": course | {"figures": {"speedup": 3.0, "a": 1, "b": 3, "c": 0}}}, [one_node]
    )
    assert not held and "does not hold: a_toy: c: c >= 1" in report  # recorded, it is held to its claim
    smoke = {"a_toy.ipynb": {"run": {"size": "smoke"}, "figures": {"speedup": 1.0}}}
    assert run_course.claims_report(smoke, [toy]) == (
        "claims: none checked (no lesson with claims ran at the course size)",
        True,
    )


def test_the_claims_report_says_what_each_kind_of_speedup_it_shows_times():
    """A speed-up's line names its kind (course.claims.Claim.speedup_of), and the report ends with what each kind
    shown times, in the words of course.claims.SPEEDUPS_OF: a start-up is not read as computing done faster."""
    toy = lessons.Lesson(
        "a_toy",
        "a toy",
        "toy accuracy",
        floor=0.5,
        exercises=(),
        budget="beans",
        claims=(
            claims.Claim("local mode comes sooner", "workers_s", 3.0, "local_s", speedup_of="start-up"),
            claims.Claim("batches answer faster", "one_by_one_s", 2.0, "batched_s", speedup_of="computing"),
            claims.Claim("the pool is used", "batches", 1.0, "loads"),
        ),
    )
    figures = {"workers_s": 9.0, "local_s": 0.1, "one_by_one_s": 1.0, "batched_s": 1.0, "batches": 2, "loads": 0}
    report, held = run_course.claims_report({"a_toy.ipynb": {"run": {"size": "course"}, "figures": figures}}, [toy])
    assert not held and report.splitlines() == [
        "claims: 2 of 3 hold (course.lessons)",
        "  does not hold: a_toy: batches answer faster: one_by_one_s >= 2 x batched_s (times computing) (the figures "
        f"are {figures})",
        "  holds: a_toy: local mode comes sooner: workers_s >= 3 x local_s (times start-up); measured workers_s = 90 x "
        "local_s",
        "  holds: a_toy: the pool is used: batches >= 1 x loads; measured batches = 2, loads = 0",
        "what the speed-ups time:",
        f"  start-up: {claims.SPEEDUPS_OF['start-up']}",
        f"  computing: {claims.SPEEDUPS_OF['computing']}",
    ]
    assert "local mode skips" in claims.SPEEDUPS_OF["start-up"]
