"""Hugging Face ViT models: the stand-in checkpoint, and loading any checkpoint with a new head."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessorPil

from helpers.config import is_local, require_local

# The stand-in checkpoint's configuration: a Hugging Face ViT like google/vit-base-patch16-224-in21k, much smaller
# (about 0.55 M parameters; not the plain-PyTorch ViT of notebook 04, see helpers.vit).
STANDIN_VIT_CONFIG = dict(
    image_size=64, patch_size=8, hidden_size=128, num_hidden_layers=4,
    num_attention_heads=4, intermediate_size=256,
)  # fmt: skip


def label_maps(class_names: Sequence[str]) -> tuple[dict[int, str], dict[str, int]]:
    """``id2label`` and ``label2id`` for a list of class names."""
    return dict(enumerate(class_names)), {name: i for i, name in enumerate(class_names)}


def standin_vit(class_names: Sequence[str]) -> ViTForImageClassification:
    """A randomly initialised tiny ViT classifier (the stand-in before pretraining)."""
    id2label, label2id = label_maps(class_names)
    config = ViTConfig(**STANDIN_VIT_CONFIG, num_labels=len(class_names), id2label=id2label, label2id=label2id)
    return ViTForImageClassification(config)


def standin_processor() -> ViTImageProcessorPil:
    """The image processor of the tiny ViT: resize to 64x64, scale to [0, 1], normalise to [-1, 1]."""
    size = STANDIN_VIT_CONFIG["image_size"]
    return ViTImageProcessorPil(size={"height": size, "width": size}, image_mean=[0.5] * 3, image_std=[0.5] * 3)


def _checkpoint(name_or_path: str) -> str:
    """Fail early, with the fix, when a local checkpoint folder has not been built."""
    if is_local(name_or_path):
        require_local(name_or_path, "pretrained ViT checkpoint")
    return name_or_path


def load_processor(name_or_path: str) -> ViTImageProcessorPil:
    """The image processor saved with a checkpoint (a local folder or a Hub id)."""
    return ViTImageProcessorPil.from_pretrained(_checkpoint(name_or_path))


def load_classifier(name_or_path: str, class_names: Sequence[str]) -> ViTForImageClassification:
    """A pretrained ViT with a new, randomly initialised head for ``class_names``."""
    id2label, label2id = label_maps(class_names)
    return ViTForImageClassification.from_pretrained(
        _checkpoint(name_or_path),
        num_labels=len(class_names),
        id2label=id2label,
        label2id=label2id,
        ignore_mismatched_sizes=True,  # the pretraining head has other classes
    )


def pretrain(
    model: ViTForImageClassification,
    pixel_values: torch.Tensor,
    label_ids: torch.Tensor,
    epochs: int = 3,
    batch_size: int = 128,
    lr: float = 2e-3,
    seed: int = 0,
    progress: bool = True,
) -> list[float]:
    """Train ``model`` on preprocessed images with AdamW and a cosine schedule; return the epoch losses.

    ``progress=False``: no progress bar (in a notebook each would be a widget)."""
    torch.manual_seed(seed)
    steps = epochs * int(np.ceil(len(label_ids) / batch_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.1)
    losses = []
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(label_ids))
        total = 0.0
        starts = range(0, len(order), batch_size)
        for start in tqdm(starts, desc=f"pretrain epoch {epoch + 1}/{epochs}", disable=not progress):
            idx = order[start : start + batch_size]
            loss = model(pixel_values=pixel_values[idx], labels=label_ids[idx]).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * len(idx)
        losses.append(total / len(label_ids))
    return losses


@torch.no_grad()
def predict(model: ViTForImageClassification, pixel_values: torch.Tensor, batch_size: int = 256) -> np.ndarray:
    """Class ids predicted for a tensor of preprocessed images."""
    model.eval()
    device = next(model.parameters()).device
    chunks = [
        model(pixel_values=pixel_values[i : i + batch_size].to(device)).logits.argmax(-1).cpu()
        for i in range(0, len(pixel_values), batch_size)
    ]
    return torch.cat(chunks).numpy()
