"""Notebook 07's limits on trials at once hold: Tune applies ``TuneConfig(max_concurrent_trials=...)`` only to a search
algorithm of the ``Searcher`` kind, and ignores it (a warning the notebook's quiet loggers hide) for a
``BasicVariantGenerator`` given as ``search_alg``; the generator takes the limit itself (``max_concurrent``). Step 4's
trainers would otherwise start as many trials as there are free CPUs, and their trainers wait for their workers."""

from __future__ import annotations

import ast

from executed import NOTEBOOKS, ROOT, calls
from ray.tune.search import Searcher
from ray.tune.search.basic_variant import BasicVariantGenerator

TUNE_NOTEBOOKS = [path for path in NOTEBOOKS if calls(path, "tune.TuneConfig")] + [
    path for path in sorted((ROOT / "solutions").glob("*.ipynb")) if calls(path, "tune.TuneConfig")
]


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def test_a_basic_variant_generator_is_no_searcher_so_tune_ignores_max_concurrent_trials_for_it():
    assert not issubclass(BasicVariantGenerator, Searcher)  # what tune.run's check reads (ray/tune/tune.py)
    assert BasicVariantGenerator(max_concurrent=2).max_concurrent == 2


def test_every_limit_on_trials_at_once_is_where_tune_applies_it():
    assert TUNE_NOTEBOOKS, "notebook 07 configures Tune"
    found = []
    for path in TUNE_NOTEBOOKS:
        for call in calls(path, "tune.TuneConfig"):
            search = keyword(call, "search_alg")
            generator = isinstance(search, ast.Call) and ast.unparse(search.func) == "BasicVariantGenerator"
            if generator and keyword(call, "max_concurrent_trials") is not None:
                found.append(f"{path.name}: max_concurrent_trials with a BasicVariantGenerator (ignored by Tune)")
            if generator and path.parent.name == "notebooks" and keyword(search, "max_concurrent") is None:
                found.append(f"{path.name}: a BasicVariantGenerator without max_concurrent (no limit at all)")
    assert not found, found
