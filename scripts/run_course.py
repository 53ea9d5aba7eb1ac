"""Execute every course notebook in order into results/executed/ and print a summary table.

Run by `make run` inside a local Ray cluster (scripts/with-ray-cluster.sh).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from helpers import config, results

NOTEBOOKS = config.REPO_ROOT / "notebooks"
EXECUTED = config.RESULTS_DIR / "executed"


def execute(path: Path) -> tuple[float, str]:
    """Run one notebook with its own folder as working directory; return (seconds, status)."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.perf_counter()
    status = "ok"
    try:
        client.execute()
    except CellExecutionError as error:
        status = "FAILED: " + str(error).strip().splitlines()[-1][:80]
    EXECUTED.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, EXECUTED / path.name)
    return time.perf_counter() - start, status


def main() -> int:
    rows = []
    for path in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")):
        print(f"running {path.name} ...", flush=True)
        results.metrics_path(path.stem).unlink(missing_ok=True)  # no stale figures from an earlier run
        seconds, status = execute(path)
        accuracy = results.read(path.stem).get("val_accuracy")
        rows.append((path.name, seconds, accuracy, status))
        print(f"  {status} in {seconds:.0f} s", flush=True)
    print(f"\nexecuted notebooks are in {EXECUTED}\n")
    print(f"{'notebook':<34} {'wall time':>10} {'val accuracy':>13}  status")
    for name, seconds, accuracy, status in rows:
        shown = f"{accuracy:.3f}" if accuracy is not None else "-"
        print(f"{name:<34} {seconds:>9.0f}s {shown:>13}  {status}")
    return 0 if all(row[3] == "ok" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
