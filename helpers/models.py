"""The pretrained image classifier the beans and dogs lessons fine-tune (``Sources.model``, ``COURSE_MODEL``): loaded
through transformers' Auto classes, so another image classifier from the Hub is a setting (the stand-in, a tiny ViT,
is built by ``course.build``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import (
    AutoImageProcessor,
    AutoModelForImageClassification,
    BaseImageProcessor,
    PreTrainedModel,
)

from course.sources import is_local, require_local


def label_maps(class_names: Sequence[str]) -> tuple[dict[int, str], dict[str, int]]:
    """``id2label`` and ``label2id`` for a list of class names."""
    return dict(enumerate(class_names)), {name: i for i, name in enumerate(class_names)}


# transformers 5 has two kinds of image processor: torchvision's and PIL's. The course installs no torchvision (with
# the CPU build of torch it breaks transformers' vision models), so it asks for PIL's.
IMAGE_BACKEND = "pil"


def _checkpoint(name_or_path: str | Path) -> str:
    """Fail early, with the fix, when a local checkpoint folder has not been built."""
    if is_local(str(name_or_path)):
        require_local(name_or_path, "pretrained model checkpoint")
    return str(name_or_path)


def load_processor(name_or_path: str | Path) -> BaseImageProcessor:
    """The image processor saved with a checkpoint (a local folder or a Hub id), whatever the model's kind."""
    return AutoImageProcessor.from_pretrained(_checkpoint(name_or_path), backend=IMAGE_BACKEND)


def load_model(name_or_path: str | Path) -> PreTrainedModel:
    """A fine-tuned image classifier as it was saved (its head and its class names), whatever the model's kind."""
    return AutoModelForImageClassification.from_pretrained(_checkpoint(name_or_path))


def load_classifier(name_or_path: str | Path, class_names: Sequence[str]) -> PreTrainedModel:
    """A pretrained image classifier with a new, randomly initialised head for ``class_names``."""
    id2label, label2id = label_maps(class_names)
    return AutoModelForImageClassification.from_pretrained(
        _checkpoint(name_or_path),
        num_labels=len(class_names),
        id2label=id2label,
        label2id=label2id,
        ignore_mismatched_sizes=True,  # the pretraining head has other classes
    )


@torch.no_grad()
def predict(model: PreTrainedModel, pixel_values: torch.Tensor, batch_size: int = 256) -> np.ndarray:
    """Class ids predicted for a tensor of preprocessed images."""
    model.eval()
    device = next(model.parameters()).device
    chunks = [
        model(pixel_values=pixel_values[i : i + batch_size].to(device)).logits.argmax(-1).cpu()
        for i in range(0, len(pixel_values), batch_size)
    ]
    return torch.cat(chunks).numpy()
