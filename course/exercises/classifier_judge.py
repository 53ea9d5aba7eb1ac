"""03.1's judging of a learner's actor class for ``map_batches``: the check's own model and images, the class run in
this process on batches as an actor of the pool gets them, with the models it loads and the forward passes it runs
counted, and the findings on the rows that come out (course.exercises.ray_data runs it, then on an actor pool)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from course.exercises.checking import Raised, attempt

CONFIDENT_CLASSES = ["dog", "fish", "bird"]  # 03.1's own model: the lesson's model with a new head, seeded


def confident_checkpoint(folder: Path) -> Any:
    """03.1's model: a Ray Train checkpoint as ``RayTrainReportCallback`` writes one, of a model no lesson trained,
    written in ``folder``."""
    from ray.train import Checkpoint
    from ray.train.huggingface.transformers import RayTrainReportCallback
    from transformers import set_seed

    from course.sources import get_sources
    from helpers.models import load_classifier, load_processor

    pretrained = get_sources().model
    set_seed(1)
    model = load_classifier(pretrained, CONFIDENT_CLASSES)
    torch.nn.init.normal_(model.classifier.weight, std=0.5)  # a head whose choice varies from image to image
    torch.nn.init.zeros_(model.classifier.bias)
    model_dir = folder / RayTrainReportCallback.CHECKPOINT_NAME
    model.save_pretrained(model_dir)
    load_processor(pretrained).save_pretrained(model_dir)
    return Checkpoint.from_directory(folder)


def unseen_images() -> list[np.ndarray]:
    """Images no lesson showed: random pixels, sizes of their own, one grayscale (H, W) and one RGBA."""
    rng = np.random.default_rng(3)
    sizes = [(40, 56, 3), (64, 64, 3), (30, 90), (77, 45, 3), (52, 52, 4), (64, 80, 3), (33, 33, 3)]
    return [rng.integers(0, 256, size, dtype=np.uint8) for size in sizes]


def expected_confidence(checkpoint: Any, images: list[np.ndarray]) -> tuple[list[str], np.ndarray]:
    """The predicted class name and its softmax probability for each image, computed here; the probabilities as
    float64, like the learner's column read back, so that a verdict prints 0.741, not float32's 0.7409999966621399."""
    from helpers.features import pixel_values
    from helpers.models import load_model, load_processor

    with checkpoint.as_directory() as folder:
        processor = load_processor(Path(folder) / "checkpoint")
        model = load_model(Path(folder) / "checkpoint").eval()
    with torch.no_grad():
        probabilities = model(pixel_values=pixel_values(processor, images)).logits.softmax(-1)
    confidence, ids = probabilities.max(-1)
    return [model.config.id2label[i] for i in ids.tolist()], confidence.numpy().astype(float)


WORK = {"loads": 0, "forwards": 0}  # in the process that runs 03.1's answer: models loaded, forward passes run


def count_model_work(undo: list | None = None) -> None:
    """In this process, count every ``from_pretrained`` of a transformers model and every forward pass of a model so
    loaded, whatever its class (03.1's check runs the learner's class with it). ``undo``, where given, collects what
    was replaced, for :func:`model_work_counted` to put back."""
    from transformers import PreTrainedModel

    if getattr(PreTrainedModel, "_counted_by_check", False):
        return

    def replace(owner: type, name: str, value: Any) -> None:
        if undo is not None:
            undo.append((owner, name, owner.__dict__.get(name, _ABSENT)))
        setattr(owner, name, value)

    load = PreTrainedModel.from_pretrained.__func__

    def count_forwards(model_class: type) -> None:
        if model_class.__dict__.get("_forwards_counted"):
            return
        forward = model_class.forward

        def counted_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
            WORK["forwards"] += 1
            return forward(self, *args, **kwargs)

        replace(model_class, "forward", counted_forward)
        replace(model_class, "_forwards_counted", True)

    def counted_load(cls: type, *args: Any, **kwargs: Any) -> Any:
        WORK["loads"] += 1
        model = load(cls, *args, **kwargs)
        count_forwards(type(model))
        return model

    replace(PreTrainedModel, "from_pretrained", classmethod(counted_load))
    replace(PreTrainedModel, "_counted_by_check", True)


_ABSENT = object()  # an attribute a class did not have before the count


@contextlib.contextmanager
def model_work_counted():
    """:func:`count_model_work` for the block only: the learner's kernel keeps transformers as it was."""
    undo: list = []
    count_model_work(undo)
    try:
        yield
    finally:
        for owner, name, value in reversed(undo):
            if value is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def watched_class(classifier_class: type) -> type:
    """The learner's actor class, with what each call does counted: columns ``_loads`` and ``_forwards`` say how
    many models its ``__call__`` loaded and how many forward passes it ran for that batch."""

    class Watched(classifier_class):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            from course.exercises import (
                classifier_judge as exercises,  # the module's own counters, not a copy pickled with this class
            )

            exercises.count_model_work()  # in an actor; in this process, model_work_counted has done it already
            super().__init__(*args, **kwargs)

        def __call__(self, batch: Any) -> Any:
            from course.exercises import classifier_judge as exercises

            before = dict(exercises.WORK)
            out = super().__call__(batch)
            if isinstance(out, dict) and "id" in out:
                rows = len(out["id"])
                out["_loads"] = np.full(rows, exercises.WORK["loads"] - before["loads"])
                out["_forwards"] = np.full(rows, exercises.WORK["forwards"] - before["forwards"])
            return out

    Watched.__name__ = classifier_class.__name__  # Ray Data names the operator after it
    return Watched


COUNTS = ("_loads", "_forwards")  # the columns watched_class adds to each batch: models loaded, forward passes run
BATCH_SIZE = 3  # 03.1's check: the images reach `__call__` three at a time (the last batch: one)


def error_hint(failure: str) -> str:
    """What to look at for the learner's error ``failure`` (``IndexError: ...``), where the check knows the usual
    cause."""
    if "IndexError" in failure:
        return (
            ": are the class names a list written in? The model names its own classes, `model.config.id2label[i]`, "
            "and this one has three"
        )
    if any(word in failure.lower() for word in ("channel", "dimension", "shape", "mode", "mean")):
        return (
            ". The images are of several sizes, one grayscale and one RGBA: `pixel_values(processor, images)` "
            "converts them to RGB"
        )
    return ""


def run_here(classifier_class: type, checkpoint: Any, rows: list[dict]) -> pd.DataFrame:
    """The learner's class in this process, as an actor of the pool would run it: made once with the checkpoint, then
    called on batches of :data:`BATCH_SIZE` rows, each a dict of numpy arrays as ``map_batches`` gives it (``image``:
    an object array of images of their own sizes)."""
    with model_work_counted():
        try:
            actor = attempt(watched_class(classifier_class), checkpoint=checkpoint)
        except Raised as raised:
            raise AssertionError(f"making it with the checkpoint, {raised}{error_hint(str(raised))}") from None
        frames = []
        for start in range(0, len(rows), BATCH_SIZE):
            part = rows[start : start + BATCH_SIZE]
            images = np.empty(len(part), dtype=object)
            images[:] = [row["image"] for row in part]
            try:
                out = attempt(actor, {"id": np.array([row["id"] for row in part]), "image": images})
            except Raised as raised:
                raise AssertionError(
                    f"called on a batch of {len(part)} images, {raised}{error_hint(str(raised))}"
                ) from None
            assert isinstance(out, dict), (
                f"`__call__` returned {type(out).__name__} for a batch of {len(part)} images: return the batch, a dict "
                "of columns, with `predicted` and `confidence` added"
            )
            lengths = {  # the learner's columns, not the two the count adds
                name: len(value) if hasattr(value, "__len__") else None
                for name, value in out.items()
                if name not in COUNTS
            }
            assert set(lengths.values()) == {len(part)}, (
                f"for a batch of {len(part)} images `__call__` returned columns of these lengths: {lengths}. Every "
                "column holds one value per row"
            )
            frames.append(pd.DataFrame({name: list(value) for name, value in out.items()}))
    return pd.concat(frames, ignore_index=True)


def judge(out: pd.DataFrame, names: list[str], confidence: np.ndarray) -> None:
    """03.1's findings on the rows that came out (with the columns ``_loads`` and ``_forwards`` of the watched class),
    against the expected class ``names`` and ``confidence``; AssertionError with the first one."""
    columns = sorted(set(out.columns) - set(COUNTS))
    assert {"predicted", "confidence"} <= set(columns), (
        f"the rows have the columns {columns}: add `predicted` and `confidence` to the batch"
    )
    assert {"id", "image"} <= set(columns), (
        f"the rows have the columns {columns}: add your columns to the batch and return it whole, "
        "the next stage needs the others"
    )
    assert len(out) == len(names), f"{len(out)} rows came out of {len(names)}: keep every row"
    counted = set(COUNTS) <= set(out.columns)  # per batch of 3 (see watched_class)
    loads, forwards = (int(out[column].max()) if counted else 0 for column in COUNTS)
    out = out.drop(columns=list(COUNTS), errors="ignore").sort_values("id")
    predicted = [str(name) for name in out["predicted"]]
    assert predicted == names, (
        f"predicted {predicted}, expected {names}: the class *name* of the highest logit, "
        "`model.config.id2label[...]`, for each image (grayscale and RGBA ones converted to RGB)"
    )
    found = out["confidence"].to_numpy(dtype=float)
    assert ((found >= 0) & (found <= 1)).all(), (
        f"confidence {np.round(found, 3).tolist()}: a probability lies between 0 and 1; turn the logits into "
        "probabilities with a softmax first"
    )
    assert np.allclose(found, confidence, atol=1e-4), (
        f"confidence {np.round(found, 3).tolist()}, expected {np.round(confidence, 3).tolist()}: the softmax "
        "probability of the *predicted* class, for each image"
    )
    assert loads == 0, (
        "the answers are right, but your `__call__` loads the model, once for every batch: load it once, in "
        "`__init__`, where each actor of the pool keeps it for all the batches it is given"
    )
    assert forwards <= 1, (
        f"the answers are right, but the model ran {forwards} forward passes for a batch of 3 images: give it the "
        "whole batch in one call (the processor takes a list of images), not one image at a time"
    )
