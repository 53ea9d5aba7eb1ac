"""What hardware there is, and what to ask for: GPUs (and mixed precision) only where they exist.

Two questions, one module: does *this process* see a GPU (:func:`has_gpu`, for code that runs here or on
a worker), and what should a notebook ask the *cluster* for (:func:`plan_resources`, from what
``ray.cluster_resources()`` reports and the budget).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.course.config import Budget


def has_gpu() -> bool:
    """True when this process sees a CUDA GPU."""
    return torch.cuda.is_available()


def device() -> torch.device:
    """The device this process trains on: its GPU if it has one, else the CPU."""
    return torch.device("cuda" if has_gpu() else "cpu")


def precision_args() -> dict[str, bool]:
    """``TrainingArguments`` for the device: bf16 or fp16 on a GPU, full precision on a CPU."""
    if not has_gpu():
        return {"use_cpu": True}
    return {"bf16": True} if torch.cuda.is_bf16_supported() else {"fp16": True}


def cluster_gpus(resources: dict[str, float]) -> int:
    """Whole GPUs in ``ray.cluster_resources()``: 0 on a CPU cluster."""
    return int(resources.get("GPU", 0))


@dataclass(frozen=True)
class Plan:
    """What to ask Ray for: training workers, inference actors, and GPUs only when they exist."""

    num_workers: int
    use_gpu: bool
    num_actors: int
    gpus_per_actor: float


def plan_resources(resources: dict[str, float], budget: Budget) -> Plan:
    """A plan that fits ``ray.cluster_resources()`` and the budget: one GPU per worker and actor if there are GPUs."""
    gpus, cpus = cluster_gpus(resources), int(resources.get("CPU", 0))
    if gpus:
        return Plan(
            num_workers=min(budget.max_workers, gpus),
            use_gpu=True,
            num_actors=min(budget.max_actors, gpus),
            gpus_per_actor=1,
        )
    # CPU only: leave a CPU for Ray Data's reads next to every worker and actor.
    workers = max(1, min(budget.max_workers, cpus // 2))
    actors = max(1, min(budget.max_actors, (cpus - workers) // 2))
    return Plan(num_workers=workers, use_gpu=False, num_actors=actors, gpus_per_actor=0)
