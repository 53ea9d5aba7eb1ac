"""Inference with a fine-tuned image classifier: a callable class for ``Dataset.map_batches`` (notebook 03) that a Serve
deployment holds too (notebook 06)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import torch
from ray.train import Checkpoint
from transformers import BaseImageProcessor

from course.resources import device
from helpers.features import pixel_values
from helpers.models import load_model, load_processor

HF_FOLDER = "checkpoint"  # where RayTrainReportCallback puts the Hugging Face files inside a Ray checkpoint
# What a Hugging Face Trainer saves beside the model to resume training, and inference never reads: for ViT-B/16 the
# optimizer state alone is about 686 MB, twice the weights.
TRAINING_STATE = ("optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state", "training_args.bin", "trainer_state.json")


def is_training_state(name: str) -> bool:
    return name.startswith(TRAINING_STATE)


@contextmanager
def model_folder(checkpoint: Checkpoint | str | Path) -> Iterator[Path]:
    """The Hugging Face folder of a Ray Train checkpoint, or a `save_pretrained` folder.

    A checkpoint on this machine's disk (or a mount) is read where it is. One in a bucket is downloaded into a
    temporary folder, the model's files only (:data:`TRAINING_STATE` stays behind): every replica and actor that
    loads it fetches the weights, not the optimizer state as well.
    """
    if not isinstance(checkpoint, Checkpoint):
        yield Path(checkpoint)
    elif isinstance(checkpoint.filesystem, pafs.LocalFileSystem):
        with checkpoint.as_directory() as folder:
            yield Path(folder) / HF_FOLDER
    else:
        fs, remote = checkpoint.filesystem, f"{checkpoint.path.rstrip('/')}/{HF_FOLDER}"
        with tempfile.TemporaryDirectory() as folder:
            for info in fs.get_file_info(pafs.FileSelector(remote, recursive=True)):
                relative = info.path[len(remote) :].lstrip("/")
                if info.type != pafs.FileType.File or is_training_state(relative.split("/")[-1]):
                    continue
                target = Path(folder) / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with fs.open_input_stream(info.path) as source, target.open("wb") as sink:
                    while chunk := source.read(1 << 24):
                        sink.write(chunk)
            yield Path(folder)


def load_checkpoint_processor(checkpoint: Checkpoint | str | Path) -> BaseImageProcessor:
    """The image processor saved with a fine-tuned model, without loading the model."""
    with model_folder(checkpoint) as folder:
        return load_processor(folder)


class ImageClassifier:
    """Loads the model once (``__init__``), then labels a whole batch of images per call.

    ``processor`` turns images into ``pixel_values`` (``features.pixel_values``); :meth:`probabilities`
    runs the model on them; ``class_names`` says what each column of the probabilities is.
    """

    def __init__(self, checkpoint: Checkpoint | str | Path) -> None:
        self.device = device()
        with model_folder(checkpoint) as folder:  # a Ray Train checkpoint, or a folder written by `save_pretrained`
            self.processor = load_processor(folder)
            self.model = load_model(folder).to(self.device).eval()
        self.class_names = [self.model.config.id2label[i] for i in range(self.model.config.num_labels)]

    @torch.no_grad()
    def probabilities(self, pixels: torch.Tensor | np.ndarray) -> np.ndarray:
        """Class probabilities, (N, classes), for N preprocessed images: one forward pass."""
        logits = self.model(pixel_values=torch.as_tensor(pixels).to(self.device)).logits
        return logits.softmax(-1).float().cpu().numpy()

    @torch.no_grad()
    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        pixels = pixel_values(self.processor, list(batch["image"])).to(self.device)
        ids = self.model(pixel_values=pixels).logits.argmax(-1).cpu().tolist()  # one forward pass per batch
        batch["predicted"] = np.array([self.model.config.id2label[i] for i in ids])
        return batch
