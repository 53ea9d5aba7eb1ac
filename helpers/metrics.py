"""Accuracy through Hugging Face `evaluate`, from the metric script the course ships."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import evaluate
import numpy as np
from transformers import EvalPrediction

ACCURACY_SCRIPT = Path(__file__).parent / "metric_scripts" / "accuracy.py"


def load_accuracy() -> evaluate.EvaluationModule:
    """The accuracy metric, loaded offline (`evaluate.load("accuracy")` would need the Hub)."""
    return evaluate.load(str(ACCURACY_SCRIPT))


def accuracy_for_trainer(metric: evaluate.EvaluationModule) -> Callable[[EvalPrediction], dict[str, float]]:
    """A ``compute_metrics`` function for the Hugging Face ``Trainer``: argmax of logits, then ``metric``."""

    def compute_metrics(eval_pred: EvalPrediction) -> dict[str, float]:
        logits, labels = eval_pred
        return metric.compute(predictions=np.argmax(logits, axis=-1), references=labels)

    return compute_metrics
