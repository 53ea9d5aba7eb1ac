"""`make gpu-check` (scripts/gpu_check.py) on a machine without a GPU, and its table's rows (the GPU rows themselves
run only where a GPU is: docs/development.md, "On a GPU machine")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_check  # noqa: E402


def test_without_a_gpu_it_stops_at_once_and_says_so():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_check.py")],
        env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "needs an NVIDIA GPU" in done.stderr, done.stderr


def test_a_check_that_breaks_is_a_failed_row_and_the_table_has_one_line_per_row():
    def broken() -> str:
        raise RuntimeError("NCCL error: unhandled system error")

    name, outcome, seconds = gpu_check.timed("NCCL between two Ray Train workers", broken)
    assert outcome.startswith("FAILED: RuntimeError: NCCL error") and float(seconds) >= 0
    table = gpu_check.table([(name, outcome, seconds), ("make bench QUICK=1", "ok", "40")]).splitlines()
    assert table[0] == "| check | outcome | seconds |" and len(table) == 4
    assert table[-1] == "| make bench QUICK=1 | ok | 40 |"
