"""What hardware there is, and what to ask for: GPUs (and mixed precision) only where they exist.

Two questions, one module: does *this process* see a GPU (:func:`has_gpu`, for code that runs here or on
a worker), and what should a notebook ask the *cluster* for (:func:`plan_resources`, from what
``ray.cluster_resources()`` reports and the budget). :data:`GPUS` says what the GPUs people have can hold and do:
the lessons' estimates (``course.lessons``) and ``make doctor`` read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import ray
import torch

from course.budget import Budget


def has_gpu() -> bool:
    """True when this process may compute on a CUDA GPU: it sees one and, in a Ray task or actor, Ray gave it one.

    Ray hides no GPU from a task or actor that asked for none: on a GPU machine, a Ray Train worker scheduled on CPUs
    still sees the GPU. Computing there would use a GPU that Ray did not count, and a Hugging Face ``Trainer`` on such
    a worker crashes (DDP gets the CPU model with the GPU's device id). Seen on one H200 on 2026-11-26."""
    if not torch.cuda.is_available():
        return False
    given = ray_gpu_ids()
    return given is None or len(given) > 0


def ray_gpu_ids() -> list[str] | None:
    """The GPUs Ray gave this process when it is a Ray task or actor (empty: none); None in a driver or outside Ray."""
    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    if context.worker.mode != ray.WORKER_MODE:
        return None
    return context.get_accelerator_ids().get("GPU", [])


def device() -> torch.device:
    """The device this process trains on: its GPU if it has one, else the CPU."""
    return torch.device("cuda" if has_gpu() else "cpu")


def native_bf16() -> bool:
    """True when this process's GPU computes in bf16 in hardware (compute capability 8.0 and later: A100, A10G, L4,
    H100). ``torch.cuda.is_bf16_supported()`` alone also says yes where torch emulates bf16 (T4, V100), slowly."""
    return has_gpu() and torch.cuda.is_bf16_supported(including_emulation=False)


def precision() -> str:
    """The precision the Hugging Face lessons train in here: ``bf16`` where native, ``fp16`` on other GPUs, ``fp32``
    on a CPU."""
    if not has_gpu():
        return "fp32"
    return "bf16" if native_bf16() else "fp16"


def precision_args() -> dict[str, bool]:
    """``TrainingArguments`` for the device: bf16 where the GPU has it natively, fp16 on other GPUs (a T4, a V100),
    full precision on a CPU."""
    chosen = precision()
    return {"use_cpu": True} if chosen == "fp32" else {chosen: True}


def loader_workers() -> int:
    """Processes that decode and resize a Hugging Face ``Trainer``'s images beside its training process
    (``dataloader_num_workers``): none on a CPU, where the training process needs every core it has and a new process
    costs seconds to start; on a GPU up to 4, from the CPUs this machine has per GPU (one stays with training)."""
    if not has_gpu():
        return 0
    per_gpu = (os.cpu_count() or 1) // max(1, torch.cuda.device_count())
    return max(1, min(4, per_gpu - 1))


def pin_memory() -> bool:
    """``DataLoader(pin_memory=...)``: page-locked batches copy to a GPU faster (and asynchronously); on a CPU, no."""
    return has_gpu()


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


MIN_STEPS_ON_GPUS = 40  # the fewest optimizer steps a fine-tune takes on many GPUs (beans: about 10 epochs at 8 x 32)


def per_gpu_batches(budget: Budget, plan: Plan) -> Budget:
    """The budget with the fine-tunes' (``beans``, ``dogs``) global batches grown with the GPUs, and their steps
    shrunk to match: on a plan with GPUs each worker gets the budget's batch (16 GPUs train on 16 x 32 beans images per
    step, not 2 each), and the run takes that many times fewer steps (its evaluations as often, in images), so that it
    sees about as many images as on one GPU and ends sooner, never in fewer than :data:`MIN_STEPS_ON_GPUS` steps. On
    CPUs, and on one GPU, the budget as it is (its batch split across the workers)."""
    if not plan.use_gpu:
        return budget
    grow = plan.num_workers

    def grown(knobs: Any) -> Any:
        fewer = max(1.0, min(grow, knobs.train_steps / MIN_STEPS_ON_GPUS))
        return replace(
            knobs,
            batch_size=knobs.batch_size * grow,
            train_steps=round(knobs.train_steps / fewer),
            eval_steps=max(1, round(knobs.eval_steps / fewer)),
        )

    return replace(budget, beans=grown(budget.beans), dogs=grown(budget.dogs))


def gpus_per_replica(plan: Plan, replicas_at_once: int) -> float:
    """``num_gpus`` for each of ``replicas_at_once`` model replicas (actors, Serve deployments) that run side by side:
    a whole GPU each where the cluster has that many, a share of them where it has fewer (two replicas on one T4
    get half each, and both start), none on a CPU cluster."""
    if not plan.gpus_per_actor:
        return 0
    return min(plan.gpus_per_actor, plan.num_actors / replicas_at_once)


# --- the GPUs people have -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """What one GPU holds and computes: its memory, native bf16 or not, and its dense peak (tensor cores)."""

    name: str  # as Ray's `accelerator_type:<name>` resource spells it
    memory_gib: float
    compute_capability: tuple[int, int]
    tflops_16: float  # fp16/bf16 with fp32 accumulation, dense
    tflops_32: float  # fp32 as the course trains it (TF32 tensor cores on 8.0 and later)

    @property
    def native_bf16(self) -> bool:
        return self.compute_capability >= (8, 0)

    @property
    def mixed_precision(self) -> str:
        """What :func:`precision` picks on this GPU."""
        return "bf16" if self.native_bf16 else "fp16"


GPUS: dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        Gpu("T4", 15.0, (7, 5), 65.0, 8.1),  # 16 GB, of which 15 GiB usable
        Gpu("V100", 16.0, (7, 0), 125.0, 15.7),
        Gpu("A10G", 22.0, (8, 6), 70.0, 35.0),
        Gpu("L4", 22.0, (8, 9), 121.0, 60.0),
        Gpu("A100", 40.0, (8, 0), 312.0, 156.0),
        Gpu("A100-40G", 40.0, (8, 0), 312.0, 156.0),
        Gpu("A100-80G", 80.0, (8, 0), 312.0, 156.0),
        Gpu("H100", 80.0, (9, 0), 989.0, 494.0),
        # Every other NVIDIA type Ray names (`ray.util.accelerators`): an H200 taken for a T4 planned fp16 (2026-11-26).
        Gpu("H200", 140.0, (9, 0), 989.0, 494.0),
        Gpu("H20", 95.0, (9, 0), 148.0, 74.0),
        Gpu("L40S", 45.0, (8, 9), 362.0, 183.0),
        Gpu("RTX-PRO-6000", 95.0, (12, 0), 500.0, 126.0),
        Gpu("B200", 179.0, (10, 0), 2250.0, 1100.0),
        Gpu("GB200", 185.0, (10, 0), 2500.0, 1250.0),
        Gpu("B300", 268.0, (10, 3), 2250.0, 1100.0),  # taken at the B200's peaks
        Gpu("GB300", 268.0, (10, 3), 2500.0, 1250.0),  # taken at the GB200's peaks
        Gpu("P100", 16.0, (6, 0), 18.7, 9.3),  # no tensor cores: fp16 at twice fp32
        Gpu("P4", 7.5, (6, 1), 0.09, 5.5),  # fp16 at 1/64 of fp32
        Gpu("K80", 11.0, (3, 7), 4.4, 4.4),  # one of its two GPUs; torch 2.13 has no kernels for it
    )
}
SMALLEST = GPUS["T4"]  # what the gpu budget must fit: a learner's one GPU (Colab's free tier)


def gpu_of(resources: dict[str, float], memory_gib: float | None = None) -> Gpu | None:
    """The GPU of a cluster (the smallest, where it has several kinds), from the ``accelerator_type:<name>`` resources
    Ray reports; ``memory_gib`` (what torch measured on a node) where Ray names no type we know. None without GPUs."""
    if not cluster_gpus(resources):
        return None
    named = [key.split(":", 1)[1] for key in resources if key.startswith("accelerator_type:")]
    known = [GPUS[name] for name in named if name in GPUS]
    if known:
        return min(known, key=lambda gpu: gpu.memory_gib)
    if memory_gib:
        current = [gpu for gpu in GPUS.values() if gpu.compute_capability >= (7, 0)]  # not a K80 or a Pascal
        closest = min(current, key=lambda gpu: abs(gpu.memory_gib - memory_gib))
        return replace(closest, name="GPU of unknown type", memory_gib=memory_gib)
    return replace(SMALLEST, name="GPU of unknown type (taken for a T4)")
