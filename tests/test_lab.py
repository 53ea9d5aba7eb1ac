"""`make lab`: JupyterLab on 127.0.0.1 with its token, also as root in a container (it says what it did)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
from ports import free_port

ROOT = Path(__file__).resolve().parent.parent


def listening(process: psutil.Process) -> set[tuple[str, int]]:
    """The addresses that ``process`` and its descendants listen on."""
    found = set()
    for each in [process, *process.children(recursive=True)]:
        try:
            found |= {
                (c.laddr.ip, c.laddr.port) for c in each.net_connections("inet") if c.status == psutil.CONN_LISTEN
            }
        except psutil.NoSuchProcess:
            pass
    return found


def test_make_lab_listens_on_loopback_with_a_token_as_root_too() -> None:
    port = free_port()
    env = {**os.environ, "BROWSER": "true"}  # no browser to open here
    lab = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_PORT={port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: stopped as a whole below
    )
    try:
        deadline, sockets = time.monotonic() + 90, set()
        while time.monotonic() < deadline and port not in {p for _, p in sockets}:
            assert lab.poll() is None, lab.stdout.read()
            time.sleep(0.5)
            sockets = listening(psutil.Process(lab.pid))
        assert port in {p for _, p in sockets}, f"JupyterLab did not listen on {port} within 90 s"
        assert {ip for ip, _ in sockets} == {"127.0.0.1"}, sockets
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        output = lab.communicate(timeout=30)[0]
    assert f"http://127.0.0.1:{port}/lab?token=" in output
    if os.geteuid() == 0:
        assert "running as root (a container?): starting JupyterLab with --allow-root" in output
