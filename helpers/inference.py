"""Batch inference with a fine-tuned ViT: a callable class for ``Dataset.map_batches``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from ray.train import Checkpoint
from transformers import ViTForImageClassification, ViTImageProcessorPil

from helpers.features import pixel_values
from helpers.resources import device

HF_FOLDER = "checkpoint"  # where RayTrainReportCallback puts the Hugging Face files inside a Ray checkpoint


class ImageClassifier:
    """Loads the model once (``__init__``), then labels a whole batch of images per call."""

    def __init__(self, checkpoint: Checkpoint | str | Path) -> None:
        self.device = device()
        if isinstance(checkpoint, Checkpoint):  # a Ray Train checkpoint: local or in cloud storage
            with checkpoint.as_directory() as folder:
                self._load(Path(folder) / HF_FOLDER)
        else:  # a folder written by `save_pretrained`
            self._load(Path(checkpoint))

    def _load(self, folder: Path) -> None:
        self.processor = ViTImageProcessorPil.from_pretrained(folder)
        self.model = ViTForImageClassification.from_pretrained(folder).to(self.device).eval()

    @torch.no_grad()
    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        pixels = pixel_values(self.processor, list(batch["image"])).to(self.device)
        ids = self.model(pixel_values=pixels).logits.argmax(-1).cpu().tolist()  # one forward pass per batch
        batch["predicted"] = np.array([self.model.config.id2label[i] for i in ids])
        return batch
