"""`make lab`: JupyterLab on 127.0.0.1 with its token (as root too), its kernels on one local Ray cluster that
starts with the lab and stops with it, and no news pop-up."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from ports import beyond_loopback, free_cluster_port, listeners

from course.distributed import free_loopback_port

ROOT = Path(__file__).resolve().parents[2]
# the lab's own cluster, beside `make test`'s (6389) and the other tests' clusters (another port if this one is held)
LAB_RAY_PORT = 6689

pytestmark = pytest.mark.cluster  # starts a Ray cluster with the lab


def listening(process: psutil.Process) -> set[tuple[str, int]]:
    """The addresses that ``process`` and its descendants listen on."""
    return {(ip, port) for _, _, ip, port in listeners([process, *process.children(recursive=True)])}


def cluster_processes(port: int) -> list[psutil.Process]:
    """Ray processes of the cluster at 127.0.0.1:``port`` (their command lines name its address or port)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "ray" in line and (f"127.0.0.1:{port}" in line or f"--gcs-address=127.0.0.1:{port}" in line):
            found.append(process)
    return found


def listener_of(process: psutil.Process, port: int) -> psutil.Process | None:
    """The process among ``process`` and its descendants that listens on ``port``: the Jupyter server."""
    for each in [process, *process.children(recursive=True)]:
        try:
            if any(c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in each.net_connections("inet")):
                return each
        except psutil.NoSuchProcess:
            pass
    return None


def test_make_lab_serves_on_loopback_with_one_ray_cluster_for_its_kernels_and_stops_it() -> None:
    port, ray_port = free_loopback_port(), free_cluster_port(LAB_RAY_PORT)
    # as a learner types it: no cluster yet, and the learner's kind (not make test's isolated worker node)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "COURSE_RAY_ISOLATED_NODE")}
    env |= {"BROWSER": "true", "COURSE_RAY_PORT": str(ray_port)}  # no browser to open here
    lab = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_PORT={port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: stopped as a whole below, as Ctrl-C would
    )
    try:
        deadline, sockets = time.monotonic() + 180, set()
        while time.monotonic() < deadline and port not in {p for _, p in sockets}:
            assert lab.poll() is None, lab.stdout.read()
            time.sleep(0.5)
            sockets = listening(psutil.Process(lab.pid))
        assert port in {p for _, p in sockets}, f"JupyterLab did not listen on {port} within 180 s"
        assert {ip for ip, _ in sockets} == {"127.0.0.1"}, sockets
        server = listener_of(psutil.Process(lab.pid), port)
        assert server is not None
        assert server.environ().get("RAY_ADDRESS") == f"127.0.0.1:{ray_port}", "kernels inherit the lab's cluster"
        ray_listeners = listeners(cluster_processes(ray_port))
        assert ray_listeners and not beyond_loopback(ray_listeners), ray_listeners
        token = server.environ().get("JUPYTER_TOKEN")
        page = page_config(port, token, lab)
        assert "@jupyterlab/apputils-extension:announcements" in page["disabledExtensions"], "the news pop-up"
        kernel = kernel_of(psutil.Process(lab.pid), port, token)
        connection = json.loads(Path(next(a for a in kernel.cmdline() if a.endswith(".json"))).read_text())
        assert connection["transport"] == "ipc", f"the kernel's channels are on TCP ports, not IPC: {connection}"
        # what remains is ipykernel's pipe for the output of processes it forks, always on 127.0.0.1
        assert {ip for ip, _ in listening(kernel)} <= {"127.0.0.1"}, listening(kernel)
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        output = lab.communicate(timeout=90)[0]
    assert f"http://127.0.0.1:{port}/lab?token=" in output
    assert "running over TCP" not in output, "ipykernel's warning: the kernel was started over TCP"
    assert "[ray-cluster] starting a head node and a worker node" in output
    if os.geteuid() == 0:
        assert "running as root (a container?): starting JupyterLab with --allow-root" in output
    deadline = time.monotonic() + 60  # a process that has just been stopped may take a moment to go
    while cluster_processes(ray_port) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not cluster_processes(ray_port), "the lab's Ray cluster outlived the lab"


def page_config(port: int, token: str | None, lab: subprocess.Popen) -> dict:
    """The page config JupyterLab sends the browser (disabled extensions among it)."""
    if not token:  # printed in the server's log line, read from its runtime file otherwise
        token = lab_token(port)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=30) as response:
        html = response.read().decode()
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.DOTALL)
    assert found, "JupyterLab's page has no config data"
    return json.loads(found.group(1))


def kernel_of(lab: psutil.Process, port: int, token: str | None) -> psutil.Process:
    """Start a kernel through the lab's REST API, as opening a notebook does, and return its process once it runs."""
    if not token:
        token = lab_token(port)
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/kernels?token={token}", data=b'{"name": "python3"}', method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        kernel_id = json.loads(response.read())["id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for process in lab.children(recursive=True):
            try:
                line = " ".join(process.cmdline())
            except psutil.Error:  # a short-lived child, already gone
                continue
            if kernel_id in line and "ipykernel" in line:
                time.sleep(3)  # its sockets are bound as it starts
                return process
        time.sleep(0.5)
    raise AssertionError(f"the kernel {kernel_id} did not start within 60 s")


def lab_token(port: int) -> str:
    runtime = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "jupyter"), "server", "list", "--json"], capture_output=True, text=True
    ).stdout
    return next(json.loads(line)["token"] for line in runtime.splitlines() if f":{port}/" in line)
