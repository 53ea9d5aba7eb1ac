"""`make doctor`: its verdicts on their own, then the whole command against real clusters on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ports import free_cluster_port

from course.distributed import free_loopback_port
from course.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from doctor_checks import NOT_OK, OK  # noqa: E402
from doctor_checks.connection import CONNECT_TIMEOUT_S, address_problem  # noqa: E402
from doctor_checks.gpus import check_gpus  # noqa: E402
from doctor_checks.plan import REFERENCE_PROBE_S, plan_rows  # noqa: E402
from doctor_checks.sources import check_sources  # noqa: E402
from doctor_checks.storage import check_storage  # noqa: E402
from doctor_checks.versions import LOCK, PACKAGES, locked_versions, version_differences  # noqa: E402

NODES = [
    {"NodeID": "a", "NodeManagerAddress": "127.0.0.1", "IsHeadNode": True, "Resources": {"CPU": 4}},
    {"NodeID": "b", "NodeManagerAddress": "127.0.0.1", "Resources": {"CPU": 4, "GPU": 1}},
]


def test_the_lock_pins_what_every_node_must_match() -> None:
    assert set(locked_versions(LOCK.read_text())) == set(PACKAGES)


def test_versions_differ_only_where_they_really_do() -> None:
    locked = {"torch": "2.13.0", "ray": "2.60.0"}
    same = {"python": "3.11.7", "torch": "2.13.0+cpu", "ray": "2.60.0", "helpers": "runtime env"}
    assert version_differences(same, locked, "3.11.7") == []
    other = {"python": "3.11.9", "torch": "2.12.1", "ray": "2.60.0", "helpers": "missing"}
    wrong = version_differences(other, locked, "3.11.7")
    assert wrong == [
        "torch 2.12.1 (lock: 2.13.0)",
        "Python 3.11.9 (driver: 3.11.7)",
        "the course's package `helpers` is not installed",
    ]


def test_a_gpu_that_torch_cannot_see_is_a_blocker_with_its_fix() -> None:
    report = {"cuda": False, "count": 0, "names": [], "visible": "0", "torch": "2.13.0+cpu"}
    check = check_gpus(NODES, {"b": report})
    assert not check.ok
    assert "node 2 (127.0.0.1): Ray lists 1 GPU(s), but torch 2.13.0+cpu sees no CUDA device" in check.found
    assert "--num-gpus=0" in check.fix
    busy = check_gpus(NODES, {"b": TimeoutError("no answer within 60 s")})
    assert not busy.ok and "no answer within 60 s" in busy.found
    assert check_gpus(NODES[:1], {}).ok


def test_storage_that_one_node_cannot_write_or_another_cannot_read_is_named() -> None:
    cannot_write = check_storage("/x", NODES, ["", "PermissionError: denied"], [[], ["b"]])
    assert not cannot_write.ok
    assert cannot_write.found == "/x: node 2 (127.0.0.1) cannot write there (PermissionError: denied)"
    assert "COURSE_STORAGE_PATH" in cannot_write.fix and "s3://" in cannot_write.fix
    not_shared = check_storage("/local", NODES, ["", ""], [["b"], ["a"]])
    assert not not_shared.ok
    assert "node 1 (127.0.0.1, head) does not see what node 2 (127.0.0.1) wrote" in not_shared.found
    assert check_storage("s3://b/p", NODES, ["", ""], [[], []]).ok


def test_an_address_where_nothing_listens_is_said_within_seconds() -> None:
    """Refused at once, not after the connection's time limit (a long one here: however busy the machine, the refusal
    comes well within it)."""
    start = time.perf_counter()
    problem = address_problem(f"127.0.0.1:{free_loopback_port()}", timeout=20 * CONNECT_TIMEOUT_S)
    assert problem and problem.startswith("nothing answers at RAY_ADDRESS=127.0.0.1:")
    assert time.perf_counter() - start < 10 * CONNECT_TIMEOUT_S
    assert "not host:port" in address_problem("my-cluster")
    assert address_problem(None) is None


def test_every_notebook_gets_a_plan_row_with_an_estimate() -> None:
    rows = plan_rows({"CPU": 8}, REFERENCE_PROBE_S)
    assert [r.name for r in rows] == [lesson.number for lesson in LESSONS] + ["estimate"]
    assert all(r.ok and "about" in r.found for r in rows[:-1])
    assert "scaled by 1.0" in rows[-1].found
    assert "1 GPU each" in next(r for r in plan_rows({"CPU": 8, "GPU": 2}, 1.0) if r.name == "02").found


def run_doctor(env: dict[str, str], *wrapper: str, timeout: int = 240) -> subprocess.CompletedProcess:
    command = [*wrapper, sys.executable, str(ROOT / "scripts" / "doctor.py")]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def marks(output: str) -> dict[str, str]:
    """Check name -> ✓ or ✗, from the table."""
    rows = [line.split(maxsplit=2) for line in output.splitlines() if line[:1] in (OK, NOT_OK)]
    return {row[1]: row[0] for row in rows}


def test_nowhere_is_a_clear_message_not_a_hang() -> None:
    """Once it starts looking (its first line: its imports, many seconds on a busy machine, are done) the doctor says so
    at once; then it ends (its interpreter's exit, seconds too, under the hang's limit only)."""
    env = {**os.environ, "RAY_ADDRESS": f"127.0.0.1:{free_loopback_port()}", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(ROOT / "scripts" / "doctor.py")]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT
    ) as doc:
        stop = threading.Timer(300, doc.kill)  # a hang ends here, and fails below
        stop.start()
        try:
            lines, start, said_s = [], None, None
            for line in doc.stdout:
                lines.append(line)
                if line.startswith("make doctor: checking"):  # printed before it looks
                    start = time.perf_counter()
                elif start is not None and said_s is None and "fix: start the cluster" in line:
                    said_s = time.perf_counter() - start
            doc.wait()
        finally:
            stop.cancel()
    output = "".join(lines)
    assert doc.returncode == 2, output
    assert "✗ cluster" in output and "nothing answers at RAY_ADDRESS" in output
    assert said_s is not None and said_s < 30, output


@pytest.mark.cluster
def test_the_course_cluster_passes() -> None:
    if not os.environ.get("RAY_ADDRESS"):
        pytest.skip("run under scripts/with-ray-cluster.sh (make test does)")
    result = run_doctor(dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(marks(result.stdout).values()) == {OK}
    assert "2 node(s)" in result.stdout and "read back by every node" in result.stdout


@pytest.mark.cluster
def test_unwritable_storage_and_missing_data_are_blockers(tmp_path: Path) -> None:
    if not os.environ.get("RAY_ADDRESS"):
        pytest.skip("run under scripts/with-ray-cluster.sh (make test does)")
    env = {
        **os.environ,
        "COURSE_STORAGE_PATH": "/proc/course-storage",  # nobody can create a folder there, root neither
        "COURSE_DATA_DIR": str(tmp_path / "no-data"),
    }
    result = run_doctor(env)
    assert result.returncode == 1, result.stdout + result.stderr
    found = marks(result.stdout)
    assert found["storage"] == found["sources"] == NOT_OK
    assert found["versions"] == found["resources"] == OK
    assert "cannot write there" in result.stdout and "fix: set COURSE_STORAGE_PATH" in result.stdout
    assert "fix: run `make data`" in result.stdout


@pytest.mark.cluster
def test_a_node_that_claims_a_gpu_torch_cannot_see_is_a_blocker() -> None:
    env = {
        **os.environ,
        "COURSE_RAY_PORT": str(free_cluster_port(6789)),  # a cluster of its own, beside `make test`'s
        "COURSE_RAY_WORKER_GPUS": "1",  # like `ray start --num-gpus=1` on this CPU-only machine
    }
    env.pop("RAY_ADDRESS", None)
    env.pop("COURSE_RAY_ISOLATED_NODE", None)  # the usual two nodes: the test is about the GPU
    result = run_doctor(env, str(ROOT / "scripts" / "with-ray-cluster.sh"), timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    found = marks(result.stdout)
    assert found["gpus"] == NOT_OK, result.stdout
    assert "Ray lists 1 GPU(s), but torch" in result.stdout and "--num-gpus=0" in result.stdout


def test_a_node_that_cannot_answer_is_named_in_the_sources_row_too(monkeypatch):
    monkeypatch.setenv("COURSE_SOURCES", "standin")
    (check,) = check_sources(NODES, [[], RuntimeError("ModuleNotFoundError: helpers")], {"CPU": 8})
    assert not check.ok and "node 2 (127.0.0.1): no answer (ModuleNotFoundError: helpers)" in check.found


def test_with_the_real_sources_the_estimates_are_the_real_models_runs_not_the_stand_ins(monkeypatch) -> None:
    """A lesson that fine-tunes the real model (224 px) takes minutes where the stand-in (64 px) took seconds: the
    doctor's estimate comes from the rehearsal's run at the real sizes (``real_reference_seconds``)."""
    monkeypatch.delenv("COURSE_BUDGET", raising=False)
    minutes = {}
    for kind in ("standin", "real"):
        monkeypatch.setenv("COURSE_SOURCES", kind)
        rows = plan_rows({"CPU": 8}, REFERENCE_PROBE_S)
        minutes[kind] = {r.name: int(r.found.rsplit("about ", 1)[1].split()[0]) for r in rows[:-1]}
    for lesson in LESSONS:
        expected = max(1, round(lesson.reference_seconds_for("real") / 60))
        assert minutes["real"][lesson.number] == expected, lesson.notebook
    changed = [lesson.number for lesson in LESSONS if lesson.real_reference_seconds]
    assert changed and all(minutes["real"][n] >= minutes["standin"][n] for n in changed)
    monkeypatch.setenv("COURSE_SOURCES", "real")
    beans = next(r for r in plan_rows({"CPU": 8}, REFERENCE_PROBE_S) if r.name == "01")
    assert "80 steps of batch 16" in beans.found  # the real sources' cpu budget
    # ViT-B/16 on a laptop (COURSE_MODEL): the lessons that fine-tune it take its compute's times the measured ones
    monkeypatch.setenv("COURSE_MODEL", "google/vit-base-patch16-224-in21k")
    rows = {r.name: r.found for r in plan_rows({"CPU": 8}, REFERENCE_PROBE_S)[:-1]}
    for lesson in LESSONS:
        found = int(rows[lesson.number].rsplit("about ", 1)[1].split()[0])
        if "model" in lesson.sources:
            assert found >= 10 * minutes["real"][lesson.number], (lesson.notebook, rows[lesson.number])
            assert "x the compute of facebook/deit-tiny-patch16-224" in rows[lesson.number]
        else:
            assert found == minutes["real"][lesson.number], lesson.notebook
