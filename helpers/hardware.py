"""What hardware to ask for: a GPU (and mixed precision) only when one is there."""

from __future__ import annotations

import torch


def has_gpu() -> bool:
    """True when this process sees a CUDA GPU."""
    return torch.cuda.is_available()


def precision_args() -> dict[str, bool]:
    """``TrainingArguments`` for the device: bf16 or fp16 on a GPU, full precision on a CPU."""
    if not has_gpu():
        return {"use_cpu": True}
    return {"bf16": True} if torch.cuda.is_bf16_supported() else {"fp16": True}
