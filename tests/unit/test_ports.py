"""The socket watch that runs beside every notebook (tests/support/ports.py) sees a course process listening beyond
loopback, names it, and stays quiet about one on loopback and about processes that are not the course's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
from ports import SocketWatch, listeners

# What each of notebook 05's XGBoost workers did under Ray's own XGBoostConfig, before course.distributed gave
# it one worker and no collective on this machine: join the tracker, which makes XGBoost listen on every interface.
XGBOOST_WORKER = """
import threading, time
from xgboost import RabitTracker
from xgboost.collective import CommunicatorContext
tracker = RabitTracker(n_workers=1, host_ip="127.0.0.1", sortby="task")
tracker.start()
threading.Thread(target=tracker.wait_for, daemon=True).start()
with CommunicatorContext(**tracker.worker_args(), dmlc_task_id="0"):
    print("joined", flush=True)
    time.sleep(30)
"""
SERVE = "import socket, sys, time; s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(); time.sleep(30)"


def listen(host: str, **options) -> subprocess.Popen:
    # a child of this process: the watch takes it for one of the course's (a kernel, a Ray worker)
    return subprocess.Popen([sys.executable, "-c", SERVE, host], **options)


def listening_now(*pids: int, within_s: float = 120) -> None:
    """Wait until each of ``pids`` listens: a new interpreter can take seconds to start on a busy machine, and a watch
    that sampled before it bound would have nothing to see."""
    deadline = time.monotonic() + within_s
    for pid in pids:
        while not listeners([psutil.Process(pid)]):
            assert time.monotonic() < deadline, f"process {pid} did not listen within {within_s} s"
            time.sleep(0.1)


def five_samples(notebook: str = "99_fake") -> SocketWatch:
    """A watch that has sampled the listening sockets five times (or for 60 s: a sample reads every process's sockets,
    slow on a busy machine)."""
    with SocketWatch(notebook, interval=0.2) as watch:
        deadline = time.monotonic() + 60
        while watch.samples < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
    return watch


def watch_while(host: str, **options) -> tuple[SocketWatch, int]:
    process = listen(host, **options)
    try:
        listening_now(process.pid)
        watch = five_samples()
    finally:
        process.kill()
        process.wait()
    return watch, process.pid


def test_the_watch_names_a_listener_on_every_interface_and_the_notebook():
    watch, pid = watch_while("0.0.0.0")
    found = watch.problems()
    assert found, "a course process listened on 0.0.0.0 and the watch did not see it"
    assert all(line.startswith("99_fake: listening beyond 127.0.0.1: ") for line in found), found
    assert any(f"({pid}) 0.0.0.0:" in line for line in found), found


def test_the_watch_is_quiet_about_loopback():
    watch, pid = watch_while("127.0.0.1")
    assert watch.samples >= 5
    assert not [line for line in watch.problems() if f"({pid})" in line], watch.problems()


def test_a_process_of_the_cluster_counts_though_it_is_not_a_child(tmp_path, monkeypatch):
    """The cluster's processes descend from `ray start`, not from the test: the watch knows them by the temp folder
    that scripts/with-ray-cluster.sh exports. A process outside both is someone else's and is left alone."""
    folder = tmp_path / "ray-course-fake"
    monkeypatch.setenv("COURSE_RAY_TEMP_DIR", str(folder))

    # started through a shell that exits at once: the listener is re-parented away from this process; the member
    # names the cluster's folder in its command line, as Ray's processes do
    def orphan(last_argument: str) -> int:
        shell = f'"{sys.executable}" -c "$1" 0.0.0.0 "$2" >/dev/null 2>&1 & echo $!'
        started = subprocess.run(["/bin/sh", "-c", shell, "sh", SERVE, last_argument], capture_output=True, text=True)
        return int(started.stdout)

    outsider_pid, member_pid = orphan("-"), orphan(str(folder))
    try:
        listening_now(outsider_pid, member_pid)
        watch = five_samples()
    finally:
        for pid in (outsider_pid, member_pid):
            os.kill(pid, signal.SIGKILL)
    found = watch.problems()
    assert any(f"({member_pid}) 0.0.0.0:" in line for line in found), found
    assert not any(f"({outsider_pid})" in line for line in found), found


def test_the_watch_fails_a_notebook_whose_xgboost_workers_join_a_collective_as_05_s_did():
    """Today's 05 as the issue found it: an XGBoost worker in its collective listens beyond loopback, and the watch
    beside the notebook names the notebook and the process (test_distributed.py shows why XGBoost cannot be told)."""
    worker = subprocess.Popen([sys.executable, "-c", XGBOOST_WORKER], stdout=subprocess.PIPE, text=True)
    try:
        assert "joined\n" in iter(worker.stdout.readline, ""), "the XGBoost worker did not join its tracker"
        found = five_samples("05_data_loading_playbook").problems()
    finally:
        worker.kill()
        worker.wait()
    mine = [line for line in found if f"({worker.pid})" in line]
    assert mine and all(line.startswith("05_data_loading_playbook: listening beyond 127.0.0.1: ") for line in mine), (
        found
    )
