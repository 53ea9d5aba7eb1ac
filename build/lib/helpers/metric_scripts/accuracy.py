"""Accuracy as an `evaluate` metric that loads offline: ``evaluate.load(<path to this file>)``.

`evaluate.load("accuracy")` fetches its script from the Hugging Face Hub; this file is the
same metric, shipped with the course so that it works without a network.
"""

import datasets
import evaluate


class Accuracy(evaluate.Metric):
    """The share of predictions equal to their references."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description="Accuracy: the share of predictions that equal their references.",
            citation="",
            inputs_description="predictions and references: sequences of class ids.",
            features=datasets.Features({"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions, references) -> dict[str, float]:
        if len(predictions) == 0:
            raise ValueError("accuracy needs at least one prediction; got none.")
        correct = sum(int(p == r) for p, r in zip(predictions, references, strict=True))
        return {"accuracy": correct / len(predictions)}
