"""What the tests of a lesson on a Ray of its own share: an empty Ray temp folder, and what is still running after."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest


@pytest.fixture
def ray_temp_dir() -> Iterator[str]:
    """A Ray temp folder of the runtime's own, empty, as on a hosted runtime: `ray.init()` with no address attaches to
    the cluster its temp folder names (ray_current_cluster: a cluster started on this machine writes /tmp/ray's), so
    the lesson starts its own Ray whatever else runs here. Short: Ray's sockets are in it (107 bytes a path)."""
    folder = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def processes_holding(path: str | Path) -> list[psutil.Process]:
    """Processes whose command line holds ``path`` (a venv's: its kernel, its Ray; a Ray temp folder: that Ray's)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(str(path) in part for part in process.info["cmdline"] or ()):
            found.append(process)
    return found


@pytest.fixture
def left_running() -> Callable[[str | Path], list[psutil.Process]]:
    """``left_running(path)``: the processes of ``path`` (:func:`processes_holding`) still running after up to 30 s, the
    time a kernel and its Ray take to stop once a notebook has ended."""

    def still_running(path: str | Path) -> list[psutil.Process]:
        deadline = time.monotonic() + 30
        while processes_holding(path) and time.monotonic() < deadline:
            time.sleep(1)
        return processes_holding(path)

    return still_running
