"""The "Your turn" checks of notebook 02 (Ray Train) (rules: ``course.exercises.checking``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from course.exercises.checking import Verdict, attempt, check


def _per_worker(total: dict, workers: int) -> dict:
    """What one worker asks for, from a ``ScalingConfig``'s public ``total_resources``: ``{'CPU': 4}``."""
    return {
        name: int(amount / workers) if (amount / workers).is_integer() else amount / workers
        for name, amount in total.items()
    }


def made_up_history() -> pd.DataFrame:
    """A ``result.metrics_dataframe`` of a made-up run whose best evaluation is neither its last nor the one with the
    lowest ``eval_loss``: the loss keeps falling a little after the accuracy has peaked."""
    return pd.DataFrame(
        {
            "step": [50, 100, 150, 200, 250, 300],
            "epoch": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
            "eval_loss": [0.9, 0.6, 0.45, 0.40, 0.38, 0.47],
            "eval_accuracy": [0.61, 0.78, 0.86, 0.91, 0.89, 0.88],
        }
    )


def another_history() -> pd.DataFrame:
    """A second made-up history, of another run: 8 evaluations every 20 steps, the rows labelled 2 to 9 (as after
    a filter), the best at position 4 (label 6). An answer that reads a fixed row of the first history (position 3,
    label 3, the third from the end), or that mixes a position with a label, finds another row here."""
    return pd.DataFrame(
        {
            "step": [20, 40, 60, 80, 100, 120, 140, 160],
            "epoch": [0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6],
            "eval_loss": [0.95, 0.7, 0.55, 0.5, 0.41, 0.39, 0.37, 0.42],
            "eval_accuracy": [0.55, 0.68, 0.74, 0.80, 0.94, 0.90, 0.87, 0.89],
        },
        index=range(2, 10),
    )


def _pair(found: Any, what: str) -> tuple[Any, Any]:
    """The two values of a learner's answer that should be a pair; an AssertionError naming ``what`` otherwise."""
    assert isinstance(found, tuple | list) and len(found) == 2, (
        f"it returned {type(found).__name__} {str(found)[:80]!r}: return a pair, {what}"
    )
    return found[0], found[1]


def check_best_evaluation(best_evaluation: Callable[[pd.DataFrame], tuple[int, float]]) -> Verdict:
    """02.1: ``best_evaluation(history)`` returns the step and accuracy of the evaluation with the highest accuracy."""

    def run() -> str:
        history = made_up_history()
        step, accuracy = _pair(attempt(best_evaluation, history.copy()), "(step, eval_accuracy)")
        assert (step, accuracy) != (300, 0.88), (
            "you returned the last evaluation; the best one is where `eval_accuracy` is highest"
        )
        assert not (math.isclose(float(step), 0.91) and int(accuracy) == 200), (
            f"({step}, {accuracy}): the step and the accuracy are swapped; return `(step, eval_accuracy)`, "
            "in that order"
        )
        assert float(step) != 2.0, (
            "you returned the *epoch* (2.0) of the best evaluation; the exercise asks for its `step` "
            "(the `step` column)"
        )
        assert int(step) != 250, (
            "you returned the evaluation with the lowest `eval_loss` (step 250); the exercise asks for the highest "
            "`eval_accuracy`: the loss can go on falling after the accuracy has peaked"
        )
        assert not (int(step) == 50 and math.isclose(float(accuracy), 0.61)), (
            "you returned the evaluation with the *lowest* `eval_accuracy` (step 50, 0.61): higher is better for an "
            "accuracy, so look for its maximum (`idxmax()`, or `sort_values(..., ascending=False)`)"
        )
        assert int(step) != 200 or math.isclose(float(accuracy), 0.91), (
            f"the step is right (200) but the accuracy, {accuracy}, is not that row's (0.91): read both from the "
            "same row"
        )
        assert not (int(step) == 3 and math.isclose(float(accuracy), 0.91)), (
            "the accuracy is right (0.91) but 3 is not that row's step (200): it is the row's position in the table "
            "(what `argmax()` gives), not a step. Find the row (`idxmax()` gives its label), then read `step` from it"
        )
        assert int(step) == 200 and math.isclose(float(accuracy), 0.91), (
            f"({step}, {accuracy}) is not the row with the highest `eval_accuracy`: find the row where it is highest "
            "(`idxmax()`), and read `step` from that row"
        )
        later = another_history()
        found = _pair(attempt(best_evaluation, later.copy()), "(step, eval_accuracy)")
        assert tuple(found) != (200, 0.91), (
            "on another history it returned (200, 0.91) again, the answer for the first one: read the step and the "
            "accuracy from the `history` your function is given, not numbers written in"
        )
        step, accuracy = int(found[0]), float(found[1])
        best = later["eval_accuracy"].idxmax()
        if step == int(later.loc[best, "step"]) and math.isclose(accuracy, later.loc[best, "eval_accuracy"]):
            return "step 200, accuracy 0.91 on the made-up history: try it on `result.metrics_dataframe` too"
        steps = later["step"].astype(int)
        assert step != steps.iloc[best], (  # idxmax's label read as a position
            f"on a history whose rows are labelled {later.index[0]} to {later.index[-1]}, it returned the step of "
            f"row *position* {best} instead of the row *labelled* {best}: "
            "`argmax()` gives a row's *position* (read it with `.iloc`), `idxmax()` its *label* (read it with `.loc`): "
            "don't mix the two"
        )
        assert step != steps.loc[later["eval_accuracy"].argmax()], (  # argmax's position read as a label
            f"on a history whose rows are labelled {later.index[0]} to {later.index[-1]}, it read the row *labelled* "
            f"{later['eval_accuracy'].argmax()} instead of the row at *position* {later['eval_accuracy'].argmax()}: "
            "`argmax()` gives a row's *position* (read it with `.iloc`), `idxmax()` its *label* (read it with `.loc`): "
            "don't mix the two"
        )
        fixed = {int(steps.iloc[3]), int(steps.iloc[-3]), int(steps.loc[3])}  # row 3 of the first history
        assert step not in fixed, (
            f"on another history it returned step {step}, the row at the place where the first history had its best "
            "evaluation: your function reads a fixed row. Find the row from `eval_accuracy` in the `history` it is "
            "given, wherever that row is"
        )
        assert step != int(later.loc[best, "step"]), (
            f"on another history the step is right ({step}) but the accuracy, {accuracy}, is not that row's "
            f"({later.loc[best, 'eval_accuracy']}): read both from the same row"
        )
        raise AssertionError(
            f"on another history it returned ({step}, {accuracy}), which is not the row with the highest "
            "`eval_accuracy`: find that row in the `history` your function is given, and read `step` from it"
        )

    return check("02.1", run)


def check_scaling(scaling_for: Callable[[int, int, dict[str, float]], tuple[Any, int]]) -> Verdict:
    """02.2: ``scaling_for(workers, global_batch, resources)`` gives a ScalingConfig and the per-worker batch."""
    from ray.train import ScalingConfig

    def scaled(workers: int, batch: int, resources: dict[str, float]) -> tuple[Any, Any]:
        config, per_worker = _pair(
            attempt(scaling_for, workers, batch, dict(resources)), "(ScalingConfig, the batch of each worker)"
        )
        assert isinstance(config, ScalingConfig), f"the first value is a {type(config).__name__}, not a ScalingConfig"
        assert isinstance(per_worker, int | np.integer), (
            f"each worker's batch is {per_worker!r}, a {type(per_worker).__name__}: a batch size is a whole number "
            "(divide with `//`)"
        )
        needs = {name: amount for name, amount in config.total_resources.items() if amount}
        over = {name: amount for name, amount in needs.items() if name != "GPU" and amount > resources.get(name, 0)}
        assert not over, (
            f"{config.num_workers} workers of {_per_worker(needs, config.num_workers)} each need "
            + ", ".join(f"{amount:g} {name}" for name, amount in over.items())
            + f" in all, and this cluster has {resources}: Ray Train cannot place the workers, and the run never "
            "trains. Ask for what one worker needs (one CPU, Ray's default, is enough here), times the workers at "
            "most what `resources` has"
        )
        return config, int(per_worker)

    def run() -> str:
        config, per_worker = scaled(4, 32, {"CPU": 8.0})
        assert config.num_workers == 4, f"asked for 4 workers, the ScalingConfig has {config.num_workers}"
        assert not config.use_gpu, "this cluster has no GPU ({'CPU': 8.0}): never ask Ray for one it lacks"
        assert per_worker * 4 == 32, (
            f"each of 4 workers takes {per_worker} examples, {per_worker * 4} a step in all: the global batch is "
            "32, so every worker's batch is the global one divided by the number of workers"
        )
        config, per_worker = scaled(4, 64, {"CPU": 8.0, "GPU": 4.0})
        assert config.use_gpu, (
            "this `resources` has 4 GPUs, one for each of the 4 workers: they should use them (use_gpu=True). Decide "
            "from the `resources` your function is given, not from this machine (`torch.cuda`) or from "
            "`ray.cluster_resources()`: the check asks about other clusters"
        )
        assert per_worker == 16, f"4 workers and a global batch of 64 give {per_worker} per worker"
        config, per_worker = scaled(3, 96, {"CPU": 6.0})
        assert config.num_workers == 3 and per_worker == 32, (
            f"3 workers and a global batch of 96 gave {config.num_workers} workers of {per_worker}: use the "
            "arguments, not the lesson's numbers"
        )
        config, _ = scaled(2, 64, {"CPU": 8.0, "GPU": 0.0})
        assert not config.use_gpu, (
            "`resources` lists GPU: 0.0 here: a GPU entry with the value 0 is no GPU. Decide from how many GPUs "
            "`resources` counts, not from whether the key is there"
        )
        config, per_worker = scaled(4, 64, {"CPU": 8.0, "GPU": 2.0})
        gpus_each = config.num_gpus_per_worker if config.use_gpu else 0
        assert gpus_each * 4 <= 2.0, (
            f"4 workers of {gpus_each:g} GPU each need {gpus_each * 4:g} GPUs, and this cluster has 2: Ray Train "
            "cannot place the workers, and the run never trains. Use GPUs only when there is one for every worker "
            "(`resources.get('GPU', 0) >= num_workers`), otherwise run on CPUs"
        )
        assert per_worker == 16, f"4 workers and a global batch of 64 give {per_worker} per worker"
        return "4 workers of batch 8 on CPUs, 4 GPU workers of batch 16 when the cluster has GPUs"

    return check("02.2", run)
