"""Small notebook conveniences."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pandas as pd
from IPython.display import Markdown, display


def show_source(obj: Callable | type) -> None:
    """Show a helper's source in the notebook, so the code a lesson relies on stays in sight."""
    display(
        Markdown(f"`helpers.{obj.__module__.split('.')[-1]}.{obj.__name__}`:\n```python\n{inspect.getsource(obj)}```")
    )


def metrics_table(rows: dict[str, dict[str, float]]) -> pd.DataFrame:
    """A small table of metrics: one row per split or run, one column per metric."""
    return pd.DataFrame(rows).T.round(4)
