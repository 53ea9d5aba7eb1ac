"""The plan: one row per notebook, with what it will ask Ray for on this cluster, its main sizes and an estimate of its
run time (a training probe on a worker node, against the reference machine's); with GPUs, its memory and time on one
GPU (``course.gpu_memory``), a blocker where it does not fit."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from course import lessons
from course.budget import get_budget
from course.config import sources_kind
from course.gpu_memory import EFFICIENCY, Shape, gpu_estimates, gpu_summary, refit
from course.resources import cluster_gpus, gpu_of, plan_resources
from course.sources import get_sources, is_local
from doctor_checks import Check
from helpers.vit import architecture_named

# A lesson's `reference_seconds` (course.lessons) is what it took with the cpu budget on the reference machine
# (2 cores, the local 2-node cluster; a fresh clone's `make run`), and this is what the probe (doctor.probe_seconds)
# took there: an estimate scales the first by the probe's ratio.
REFERENCE_PROBE_S = 1.1  # seconds, the probe there (2026-11-24)
MEASURED_WITH = "facebook/deit-tiny-patch16-224"  # the model the lessons' real_reference_seconds were measured with


def planned(resources: dict[str, float]):
    """The budget the notebooks take on a cluster with ``resources``, and their plan (what they ask Ray for)."""
    budget = get_budget(cluster_gpus(resources))
    return budget, plan_resources(resources, budget)


def budget_precision(gpu) -> str:
    return f"the fine-tunes in {gpu.mixed_precision}, notebooks 04 and 07 in fp32"


def model_shapes(sources, budget) -> dict:
    """The shapes (``course.gpu_memory.Shape``) of the models the lessons put on a GPU: the sources' pretrained model
    (its ``config.json``, from its folder or the Hub's cache; ViT-B/16, the largest, where it cannot be read), notebook
    04's ViT, 05's linear model."""
    known = {  # the real sources' models, with the beans/dogs head
        "google/vit-base-patch16-224-in21k": Shape.vit(224, 16, 12, 768, 12, 3072, 3),
        "facebook/deit-tiny-patch16-224": Shape.vit(224, 16, 12, 192, 3, 768, 3),
    }
    pretrained = known.get(sources.model)
    if pretrained is None:
        try:
            if is_local(sources.model):
                found = json.loads((Path(sources.model) / "config.json").read_text())
            else:  # the Hub's cache only: the doctor waits on no download
                from transformers import AutoConfig

                found = AutoConfig.from_pretrained(sources.model, local_files_only=True).to_dict()
            pretrained = Shape.vit(
                found["image_size"],
                found["patch_size"],
                found["num_hidden_layers"],
                found["hidden_size"],
                found["num_attention_heads"],
                found["intermediate_size"],
                len(found.get("id2label") or {0: 0, 1: 1}),
            )
        except Exception:  # not a ViT-like config, or not readable from here: ViT-B/16's size
            pretrained = known["google/vit-base-patch16-224-in21k"]
    arch = architecture_named(budget.cifar.architecture)
    cifar = Shape.vit(
        arch.image_size, arch.patch_size, arch.num_layers, arch.hidden_dim, arch.num_heads, arch.mlp_dim, 10
    )
    f = budget.fsdp  # 04b's ViT: the same image and patch size as 04's, its own depth and width
    fsdp = Shape.vit(arch.image_size, arch.patch_size, f.num_layers, f.hidden_dim, f.num_heads, f.mlp_dim, 10)
    return {"pretrained": pretrained, "cifar": cifar, "fsdp": fsdp, "linear": Shape(3 * 32 * 32 * 10 + 10)}


def model_factor(lesson, budget) -> float:
    """How many times the compute of :data:`MEASURED_WITH` the pretrained model in use takes per image (its forward
    pass, from its size: ``course.gpu_memory.Shape``), for a lesson that fine-tunes it; 1 for the others.
    ``COURSE_MODEL`` set to ViT-B/16 on a laptop makes 01 to 03 and 06 about 16 times as long as the measured times."""
    if "model" not in lesson.sources:
        return 1.0
    shapes = model_shapes(get_sources(budget=budget), budget)
    measured = model_shapes(replace(get_sources(budget=budget), model=MEASURED_WITH), budget)
    return shapes["pretrained"].forward_flops() / measured["pretrained"].forward_flops()


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def gpu_row(lesson, budget, plan, gpu, text: str) -> Check:
    """A lesson's plan row with its GPU estimate on ``gpu``; a blocker, with the setting that fixes it, where the
    largest thing it holds does not fit one GPU."""
    estimates = gpu_estimates(lesson, budget, plan, gpu, model_shapes(get_sources(budget=budget), budget))
    if not estimates:
        return Check(lesson.number, True, f"{text}; no GPU")
    peak = max(estimates, key=lambda e: e.total_gib)
    _, seconds = gpu_summary(estimates)
    parts = (
        f"weights {peak.parameters_gib:.1f} + optimizer {peak.optimizer_gib:.1f} + activations "
        f"{peak.activations_gib:.1f} at batch {peak.work.batch} ({peak.work.what})"
    )
    found = f"{text}; GPU {peak.total_gib:.1f} of {gpu.memory_gib:.0f} GiB ({parts}); about {duration(seconds)}"
    too_big = [e for e in estimates if not e.fits]
    if too_big:
        return Check(lesson.number, False, f"{found}: does not fit a {gpu.name}", refit(too_big[0]))
    return Check(lesson.number, True, found)


def plan_rows(
    resources: dict[str, float], probe: float | Exception, gpu_memory_gib: float | None = None
) -> list[Check]:
    """One row per notebook: what it will ask Ray for, its main sizes, and an estimate of its run time; with GPUs,
    its GPU memory and time (:func:`gpu_row`), a blocker where it does not fit."""
    budget, plan = planned(resources)
    gpu = gpu_of(resources, gpu_memory_gib) if plan.use_gpu else None
    rows = []
    for lesson in lessons.LESSONS:
        text = lesson.plan(budget, plan)
        if budget.kind == "cpu" and isinstance(probe, float):  # the real sources' times: at the real model's sizes
            factor = model_factor(lesson, budget) if sources_kind() == "real" else 1.0
            minutes = lesson.reference_seconds_for(sources_kind()) * factor * probe / REFERENCE_PROBE_S / 60
            text += f"; about {max(1, round(minutes))} min"
            text += f" ({factor:.0f} x the compute of {MEASURED_WITH}, measured)" if factor >= 1.5 else ""
        rows.append(gpu_row(lesson, budget, plan, gpu, text) if gpu else Check(lesson.number, True, text))
    if gpu:
        rows.append(
            Check(
                "estimate",
                True,
                f"GPU memory and time per lesson on one {gpu.name} ({gpu.memory_gib:.0f} GiB, "
                f"{budget_precision(gpu)}): from the models' sizes and the budget, at "
                f"{EFFICIENCY:.0%} of its peak; not measured (time one `make run` here)",
            )
        )
    elif budget.kind != "cpu":
        rows.append(Check("estimate", True, "none for the gpu budget yet: time one `make run` on this cluster"))
    elif isinstance(probe, Exception):
        rows.append(Check("estimate", False, f"the probe task failed: {probe}", "see the versions and resources rows"))
    else:
        rows.append(
            Check(
                "estimate",
                True,
                f"a training probe took {probe:.2f} s on a worker node, {REFERENCE_PROBE_S:.2f} s on the reference "
                f"machine (2 cores): its measured times scaled by {probe / REFERENCE_PROBE_S:.1f}",
            )
        )
    return rows
