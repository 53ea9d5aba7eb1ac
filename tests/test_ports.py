"""The socket watch that runs beside every notebook (tests/ports.py) sees a course process listening beyond loopback,
names it, and stays quiet about one on loopback."""

from __future__ import annotations

import subprocess
import sys
import time

from ports import SocketWatch

SERVE = "import socket, sys, time; s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(); time.sleep(30)"


def listen(host: str) -> subprocess.Popen:
    # "ray" in the command line: the watch takes it for one of the course's processes
    return subprocess.Popen([sys.executable, "-c", SERVE, host, "ray::FakeWorker"])


def watch_while(host: str) -> tuple[SocketWatch, int]:
    process = listen(host)
    try:
        with SocketWatch("99_fake", interval=0.2) as watch:
            deadline = time.monotonic() + 10
            while watch.samples < 5 and time.monotonic() < deadline:
                time.sleep(0.2)
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
