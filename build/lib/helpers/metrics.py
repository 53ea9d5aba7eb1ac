"""Accuracy through Hugging Face `evaluate`, from the metric script the course ships."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # kept light: Ray Data and Ray Train workers import this module
    import evaluate
    from transformers import EvalPrediction

ACCURACY_SCRIPT = Path(__file__).parent / "metric_scripts" / "accuracy.py"


def load_accuracy() -> evaluate.EvaluationModule:
    """The accuracy metric, loaded offline (`evaluate.load("accuracy")` would need the Hub)."""
    import evaluate

    return evaluate.load(str(ACCURACY_SCRIPT))


def accuracy_for_trainer(metric: evaluate.EvaluationModule) -> Callable[[EvalPrediction], dict[str, float]]:
    """A ``compute_metrics`` function for the Hugging Face ``Trainer``: argmax of logits, then ``metric``.

    A copy of the ``compute_metrics`` that notebook 01 writes in its cell of section 4, for the lessons after it;
    ``tests/unit/test_lesson_twins.py`` keeps the two equal."""

    def compute_metrics(eval_pred: EvalPrediction) -> dict[str, float]:
        logits, labels = eval_pred
        return metric.compute(predictions=np.argmax(logits, axis=-1), references=labels)

    return compute_metrics


def require_examples(count: int, split: str) -> int:
    """``count`` if the split has examples; an empty split is an error (its accuracy would read as 0 or NaN)."""
    if count == 0:
        raise ValueError(
            f"the {split} split is empty: there is nothing to measure. Check the data (`make data` rebuilds "
            "the stand-ins) and the sizes that select it."
        )
    return count


def share_correct(predictions: np.ndarray, labels: np.ndarray, split: str) -> float:
    """Accuracy of ``predictions`` against ``labels`` (class ids); fails, naming ``split``, when it is empty."""
    require_examples(len(labels), split)
    return float((np.asarray(predictions) == np.asarray(labels)).mean())
