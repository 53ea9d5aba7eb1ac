"""Tools to measure data pipelines: a tally workers report to, how shuffled an order is, stand-in work, timestamps."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import ray


@ray.remote(num_cpus=0)
class Tally:
    """An actor that Ray Train workers (or tasks) send numbers to, so the driver can show them together."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, **values: float | int | str) -> None:
        self.rows.append(values)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)


def mixedness(order: np.ndarray) -> float:
    """How shuffled a sequence of ids 0..N-1 is: 0 when in order, about 1 when random (1 - |Spearman rho|)."""
    positions = np.arange(len(order))
    ranks = np.argsort(np.argsort(order))
    return float(1 - abs(np.corrcoef(positions, ranks)[0, 1]))


def busy(batch: dict[str, np.ndarray], seconds: float) -> dict[str, np.ndarray]:
    """Stand-in for a step that waits on something outside (a bucket's answer, a remote call): sleeps ``seconds``
    per batch, returns the batch. Sleeps overlap however few cores there are; computing work does not (on 2 cores
    it gains at most about 2x), so a lesson that uses it says which wait it stands for."""
    time.sleep(seconds)
    return batch


def stamp(batch: dict[str, np.ndarray], column: str) -> dict[str, np.ndarray]:
    """Add the wall-clock time at which this batch passed through, as ``column``."""
    batch[column] = np.full(len(next(iter(batch.values()))), time.time())
    return batch
