"""Accuracy through Hugging Face `evaluate`, from the metric script the course ships; two models' accuracies on the
same images, told apart from the test set's noise (McNemar's exact test)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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


NOISE_LEVEL = 0.05  # a gap whose p-value is below this is beyond the test set's noise (McNemar's test)


@dataclass(frozen=True)
class Discordant:
    """Two models' answers on the same images, where they disagree: the images only one of them got right."""

    only_first: int  # images the first model got right and the second wrong
    only_second: int  # images the second got right and the first wrong
    p_value: float  # McNemar's exact test: the chance of a split at least this uneven if both were as good

    def beyond_noise(self, level: float = NOISE_LEVEL) -> bool:
        """Whether the gap is more than the test set's noise: its p-value below ``level``."""
        return self.p_value < level


def mcnemar(first_right: np.ndarray, second_right: np.ndarray) -> Discordant:
    """McNemar's exact test of two models' accuracies on the same images, from which images each got right (booleans,
    one per image, in the same order).

    Their accuracies are not two independent samples: an image easy for one is easy for the other. What tells them
    apart is the images where they disagree. If both models were as good, each of those would be as likely to go one
    way as the other: the split is a binomial draw with p = 1/2, and the test is ``scipy.stats.binomtest`` on it
    (two-sided). With no disagreement there is nothing to tell them apart: p = 1."""
    from scipy.stats import binomtest  # imported here: Ray's workers import this module, and need it not

    first, second = np.asarray(first_right, dtype=bool), np.asarray(second_right, dtype=bool)
    if first.shape != second.shape:
        raise ValueError(f"the two models answered {first.shape} and {second.shape} images: not the same images")
    require_examples(len(first), "test")
    only_first, only_second = int((first & ~second).sum()), int((second & ~first).sum())
    disagree = only_first + only_second
    p_value = binomtest(only_first, disagree, 0.5).pvalue if disagree else 1.0
    return Discordant(only_first, only_second, float(p_value))
