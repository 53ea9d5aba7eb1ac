"""Small notebook conveniences."""

from __future__ import annotations

import pandas as pd


def metrics_table(rows: dict[str, dict[str, float]]) -> pd.DataFrame:
    """A small table of metrics: one row per split or run, one column per metric."""
    return pd.DataFrame(rows).T.round(4)
