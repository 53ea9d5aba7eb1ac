"""Where a notebook leaves its headline figures, so that `make run` can print one table."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.config import RESULTS_DIR


def metrics_path(notebook: str, results_dir: Path | None = None) -> Path:
    """The JSON file that holds a notebook's final metrics."""
    return (results_dir or RESULTS_DIR) / "metrics" / f"{notebook}.json"


def record(notebook: str, results_dir: Path | None = None, **metrics: float) -> Path:
    """Save a notebook's final metrics (for example ``val_accuracy``) as JSON; return the file."""
    path = metrics_path(notebook, results_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(metrics, indent=2, sort_keys=True))
    return path


def read(notebook: str, results_dir: Path | None = None) -> dict[str, float]:
    """The metrics a notebook recorded, or an empty dict if it recorded none."""
    path = metrics_path(notebook, results_dir)
    return json.loads(path.read_text()) if path.exists() else {}
