"""The local 2-node cluster: started from any environment, on 127.0.0.1 only, and gone after `stop`.

These tests start a cluster of their own, on another port than the one `make test` runs under, from
an environment outside .venv (a venv that borrows .venv's packages), as a conda user's would be, and on a PATH where
`pgrep` and `ps` are not to be had, as in a minimal Linux image without procps (Debian's minbase, python:3.X-slim).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from ports import beyond_loopback, free_cluster_port, listeners

from course import tracking

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "with-ray-cluster.sh"
PORT = 6589  # preferred: not the 6389 of `make test`'s own cluster (free_cluster_port takes another if it is held)
# Listeners allowed beyond loopback, with the reason (README, "The local Ray cluster"): none today.
ALLOWED_BEYOND_LOOPBACK: dict[str, str] = {}

pytestmark = pytest.mark.cluster


def other_environment(where: Path) -> Path:
    """A venv outside .venv that sees .venv's packages through a .pth file, with its own `ray` command."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = next(where.glob("lib/python3*/site-packages"))
    (site / "course.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    ray = where / "bin" / "ray"
    ray.write_text(f"#!{where}/bin/python\nfrom ray.scripts.scripts import main\nmain()\n")
    ray.chmod(0o755)
    return where


def without_procps(where: Path) -> Path:
    """A folder for the front of PATH where `pgrep` and `ps` fail as missing commands do, leaving a note if called."""
    where.mkdir(parents=True, exist_ok=True)
    for tool in ("pgrep", "ps", "pkill"):
        stub = where / tool
        stub.write_text(
            f'#!/bin/sh\necho "{tool} $*" >> "{where}/called"\necho "{tool}: command not found" >&2\nexit 127\n'
        )
        stub.chmod(0o755)
    return where


def run_script(*args: str, env: dict[str, str], timeout: int = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def names_the_cluster(process: psutil.Process, port: int) -> bool:
    """Whether ``process`` is of the cluster at 127.0.0.1:``port``: its command line names that address or port (the
    GCS, the raylets, the dashboard, Ray's other daemons), or it inherited the RAY_ADDRESS that the script exports
    before it starts anything."""
    if re.search(rf"(127\.0\.0\.1:|port[= ]){port}\b", " ".join(process.info["cmdline"] or [])):
        return True
    try:
        return process.environ().get("RAY_ADDRESS") == f"127.0.0.1:{port}"
    except psutil.Error:  # ended, or another user's: not this cluster's
        return False


def ray_processes_since(before: set[int], port: int) -> list[psutil.Process]:
    """Ray processes of the cluster at 127.0.0.1:``port`` started after the snapshot ``before``: those that name the
    cluster (:func:`names_the_cluster`) and their descendants, whoever adopted them.

    Found independently of the script's own bookkeeping (its temp folder), so a process it forgets (as the Ray Client
    server once was) is still seen. Whatever else runs on this machine is left out: `make test`'s own cluster, or
    another Ray started meanwhile, names another address (free_cluster_port: this one was free).
    """
    new = {p.pid: p for p in psutil.process_iter(["name", "cmdline", "ppid"]) if p.pid not in before}
    ours = {pid for pid, process in new.items() if names_the_cluster(process, port)}
    grown = True
    while grown:  # a raylet's workers and agents rename themselves: they are the cluster's as its children
        children = {pid for pid, process in new.items() if process.info["ppid"] in ours} - ours
        ours |= children
        grown = bool(children)
    found = []
    for pid in sorted(ours):
        text = (new[pid].info["name"] or "") + " " + " ".join(new[pid].info["cmdline"] or [])
        if "ray" in text.lower():
            found.append(new[pid])
    return found


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    result = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                result.append(process)
        except psutil.NoSuchProcess:
            pass
    return result


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A cluster started by hand (`start`) from another environment; stopped at the end, checked empty."""
    venv = other_environment(tmp_path_factory.mktemp("env") / "course-env")
    # a learner's cluster: not make test's, whose worker node shares no files (COURSE_RAY_ISOLATED_NODE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "COURSE_RAY_ISOLATED_NODE"}
    env.update(VENV=str(venv), COURSE_RAY_PORT=str(free_cluster_port(PORT)))
    env["COURSE_RESULTS_DIR"] = str(tmp_path_factory.mktemp("results"))  # the tracking server's store: the test's own
    env.pop("COURSE_TRACKING_URI", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    no_procps = without_procps(tmp_path_factory.mktemp("no-procps"))
    env["PATH"] = f"{no_procps}:{env['PATH']}"
    before = {p.pid for p in psutil.process_iter()}
    started = run_script("start", env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    exports = re.search(r"^export (.*)$", started.stdout, re.MULTILINE).group(1)
    env.update(pair.split("=", 1) for pair in exports.split())
    env["RAY_DEDUP_LOGS"] = "0"  # count every printed line, not Ray's summary of repeats
    env["BEFORE"] = ",".join(map(str, before))
    yield env
    running = cluster_processes(env)  # found independently of the script's own bookkeeping
    stopped = run_script("stop", env=env)
    assert stopped.returncode == 0, stopped.stderr
    left = alive(running)
    assert not left, f"`stop` left these processes running: {[' '.join(p.cmdline())[:120] for p in left]}"
    called = no_procps / "called"
    assert not called.exists(), (
        f"the cluster script called procps' tools, absent on minimal Linux: {called.read_text()}"
    )


def cluster_processes(env: dict[str, str]) -> list[psutil.Process]:
    return alive(ray_processes_since({int(pid) for pid in env["BEFORE"].split(",")}, int(env["COURSE_RAY_PORT"])))


def run_on_cluster(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    python = Path(env["VENV"]) / "bin" / "python"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)


TASKS = """
import sys, time, ray
from course.cluster import init_ray

class Kept:  # a stream that keeps what is written to it: the tasks' lines, as Ray forwards them, among it
    def __init__(self, stream):
        self.stream, self.written = stream, []
    def write(self, text):
        self.written.append(text)
        return self.stream.write(text)
    def __getattr__(self, name):
        return getattr(self.stream, name)

init_ray()
sys.stdout, sys.stderr = Kept(sys.stdout), Kept(sys.stderr)  # Ray prints the workers' lines to these, when they come
@ray.remote(num_cpus=1, scheduling_strategy="SPREAD")  # both nodes, even when one worker could run all eight
def where(i):
    print(f"line from task {i}")
    time.sleep(0.5)
    return sys.prefix, ray.get_runtime_context().get_node_id()
found = ray.get([where.remote(i) for i in range(8)])
print("prefixes", sorted({p for p, _ in found}))
print("nodes", len({n for _, n in found}))
# the log monitor forwards the lines a moment later (seconds on a busy machine): wait for all eight, then a while
# more, in which a line forwarded twice would come again
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    written = "".join(sys.stdout.written + sys.stderr.written)
    if all(f"line from task {i}" in written for i in range(8)):
        break
    time.sleep(0.2)
time.sleep(3)
"""


@pytest.fixture(scope="module")
def tasks(cluster) -> subprocess.CompletedProcess:
    result = run_on_cluster(TASKS, cluster)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_the_cluster_runs_tasks_from_the_chosen_environment(cluster, tasks):
    assert f"prefixes ['{cluster['VENV']}']" in tasks.stdout, tasks.stdout
    assert "nodes 2" in tasks.stdout


def test_a_line_printed_by_a_task_arrives_once(tasks):
    lines = tasks.stdout.splitlines() + tasks.stderr.splitlines()
    for i in range(8):
        assert sum(f"line from task {i}" in line for line in lines) == 1, f"task {i}:\n{tasks.stderr[-2000:]}"


def test_every_process_of_the_cluster_listens_on_loopback_only(cluster, tasks):
    processes = cluster_processes(cluster)
    assert len(processes) >= 6, "expected the GCS, two raylets, their agents and workers"
    found = [listener for listener in listeners(processes) if listener[0] not in ALLOWED_BEYOND_LOOPBACK]
    assert not beyond_loopback(found), f"listening beyond 127.0.0.1: {beyond_loopback(found)}"


def test_the_cluster_s_tracking_server_answers_on_loopback_with_its_store_in_the_results_folder(cluster):
    """The MLflow server the script starts beside the cluster (`start` exports its address); the fixture checks that
    `stop` ends it with the rest, the test above that it listens on 127.0.0.1 only."""
    uri = cluster["COURSE_TRACKING_URI"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", uri), uri
    assert tracking.problem(uri) is None, tracking.problem(uri)
    assert any("mlflow" in " ".join(p.cmdline()) for p in cluster_processes(cluster)), "no MLflow server among them"
    assert (Path(cluster["COURSE_RESULTS_DIR"]) / "mlflow" / "mlflow.db").is_file()


ALIVE_NODES = "import ray; ray.init(); print(sum(n['Alive'] for n in ray.nodes()))"


def test_the_worker_node_leaves_at_once_and_comes_back(cluster, tasks):
    """`node stop` (lesson 02c's node that leaves): the head marks the node dead at once; `node start` brings it back,
    sharing the checkout and the head's temp folder, as the cluster started it."""
    assert run_script("node", "status", env=cluster).stdout.strip() == "up"
    stopped = run_script("node", "stop", env=cluster)
    assert stopped.returncode == 0 and "stopped a worker node" in stopped.stdout, stopped.stdout + stopped.stderr
    assert run_script("node", "status", env=cluster).stdout.strip() == "down"
    assert run_on_cluster(ALIVE_NODES, cluster).stdout.strip() == "1"
    started = run_script("node", "start", env=cluster)
    assert started.returncode == 0 and "a worker node joined" in started.stdout, started.stdout + started.stderr
    assert run_on_cluster(ALIVE_NODES, cluster).stdout.strip() == "2"
    again = run_script("node", "start", env=cluster)
    assert "already up" in again.stdout, again.stdout


def test_a_cluster_started_by_hand_is_not_stopped_by_a_course_command(cluster):
    result = run_script("true", env=cluster, timeout=60)
    assert result.returncode != 0
    assert "already running" in result.stderr and "COURSE_RAY_PORT" in result.stderr
    assert run_on_cluster(ALIVE_NODES, cluster).stdout.strip() == "2"


def test_a_busy_port_names_the_setting(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = {**os.environ, "COURSE_RAY_PORT": str(taken.getsockname()[1])}
        result = run_script("true", env=env, timeout=60)
    assert result.returncode != 0
    assert "in use by another program" in result.stderr and "COURSE_RAY_PORT" in result.stderr


@pytest.mark.parametrize("how", ["fails", "killed"])
def test_the_cluster_stops_when_its_command_fails_or_is_killed(how):
    """`make test` failing, or Ctrl-C / `kill` reaching the whole process group (Ray's processes too): the cluster the
    script started stops all the same (a bare `return` in its EXIT trap once ended the cleanup halfway)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "COURSE_RAY_ISOLATED_NODE"}
    port = free_cluster_port(PORT + 20 + (how == "killed") * 10)
    env["COURSE_RAY_PORT"] = str(port)
    before = {p.pid for p in psutil.process_iter()}
    command = ["false"] if how == "fails" else ["sleep", "600"]
    script = subprocess.Popen(
        [str(SCRIPT), *command],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
    )
    if how == "killed":
        for line in script.stdout:
            if "[ray-cluster] up at" in line:
                break
        # Ctrl-C while the command runs: once it has started. A signal that reaches the group while bash forks it can
        # be lost in the child before `exec` (bash then waits for the whole `sleep 600` before running its trap).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "sleep" not in [p.name() for p in psutil.Process(script.pid).children()]:
            time.sleep(0.1)
        os.killpg(script.pid, signal.SIGTERM)
    output = script.communicate(timeout=120)[0]
    assert script.returncode == (1 if how == "fails" else 130), output
    assert "[ray-cluster] stopping" in output, output
    left = alive(ray_processes_since(before, port))
    assert not left, f"left running: {[' '.join(p.cmdline())[:120] for p in left]}"
