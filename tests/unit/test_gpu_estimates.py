"""Each lesson's GPU memory and time, estimated from the budget and the models' sizes (course.gpu_memory), and
``make doctor``'s rows for them: the gpu budget fits one 16 GB T4, and a plan that does not fit is refused with the
setting that makes it fit. No GPU and no Ray needed: the cluster is the resources Ray would report."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

import course.budget
from course.budget import get_budget
from course.gpu_memory import CONTEXT_GIB, GpuWork, Shape, estimate, gpu_estimates, gpu_summary, gpu_work, refit
from course.lessons import LESSONS
from course.resources import GPUS, gpu_of, plan_resources

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from doctor_checks.plan import plan_rows  # noqa: E402

GPU_BUDGET = get_budget(kind="gpu")
VIT_B16 = Shape.vit(224, 16, 12, 768, 12, 3072, 3)  # the real sources' model, with beans' head
CIFAR = Shape.vit(32, 4, 12, 384, 8, 768, 10)  # notebook 04's full ViT
FSDP = Shape.vit(32, 4, 12, 768, 12, 3072, 10)  # notebook 04b's ViT on the gpu budget: ViT-B's shape, 32 px images
SHAPES = {"pretrained": VIT_B16, "cifar": CIFAR, "fsdp": FSDP, "linear": Shape(3 * 32 * 32 * 10 + 10)}


def cluster(gpus: int, kind: str) -> dict[str, float]:
    return {"CPU": 12.0 * gpus, "GPU": float(gpus), f"accelerator_type:{kind}": float(gpus)}


def estimates_on(gpus: int, kind: str, budget=GPU_BUDGET):
    plan = plan_resources(cluster(gpus, kind), budget)
    return {lesson.notebook: gpu_estimates(lesson, budget, plan, GPUS[kind], SHAPES) for lesson in LESSONS}


def test_the_models_sizes_come_out_as_counted():
    import torch

    from helpers.vit import FULL, VisionTransformer, count_parameters

    assert VIT_B16.parameters == pytest.approx(85.8e6, rel=0.01)  # the Hub's ViT-B/16: 85.8 M
    assert CIFAR.parameters == pytest.approx(count_parameters(VisionTransformer(FULL)), rel=0.01)
    assert VIT_B16.tokens == 197 and CIFAR.tokens == 65
    assert VIT_B16.activation_bytes(2) == pytest.approx(89.7e6, rel=0.01)  # per image, 16-bit, 12 layers
    assert VIT_B16.activation_bytes(4) == 2 * VIT_B16.activation_bytes(2)
    del torch


def test_memory_is_weights_optimizer_and_activations_at_the_batch():
    work = GpuWork("fine-tune", "pretrained", 32, 6400, True, "mixed", "Ray Train", "beans.batch_size")
    e = estimate(work, VIT_B16, GPUS["T4"])
    gib = 2**30
    assert e.parameters_gib == pytest.approx(VIT_B16.parameters * 4 / gib)
    assert e.optimizer_gib == pytest.approx(VIT_B16.parameters * 12 / gib)  # gradients and AdamW's two moments
    assert e.activations_gib == pytest.approx(32 * VIT_B16.activation_bytes(2) / gib)
    assert e.total_gib == pytest.approx(CONTEXT_GIB + e.parameters_gib + e.optimizer_gib + e.activations_gib)
    double = estimate(replace(work, batch=64), VIT_B16, GPUS["T4"])
    assert double.activations_gib == pytest.approx(2 * e.activations_gib)
    inference = estimate(replace(work, training=False, precision="fp32"), VIT_B16, GPUS["T4"])
    assert inference.optimizer_gib == 0 and inference.activations_gib < e.activations_gib
    # time: the same work is faster on a faster GPU, and more images take longer
    assert estimate(work, VIT_B16, GPUS["H100"]).seconds < e.seconds
    assert estimate(replace(work, images=64000), VIT_B16, GPUS["T4"]).seconds > e.seconds
    # FSDP2 over 4 GPUs: each holds a quarter of the weights, gradients and AdamW state; the activations stay
    sharded = estimate(replace(work, shards=4), VIT_B16, GPUS["T4"])
    assert sharded.parameters_gib == pytest.approx(e.parameters_gib / 4)
    assert sharded.optimizer_gib == pytest.approx(e.optimizer_gib / 4)
    assert sharded.activations_gib == e.activations_gib and sharded.largest_batch > e.largest_batch


CPU_ONLY = ("00_ray_core", "02c_debugging")  # lessons that ask Ray for no GPU: Ray Core, and debugging a small CNN


def test_every_lesson_has_its_gpu_work_written():
    plan = plan_resources(cluster(1, "T4"), GPU_BUDGET)
    for lesson in LESSONS:
        works = gpu_work(lesson, GPU_BUDGET, plan)
        assert (not works) == (lesson.notebook in CPU_ONLY), lesson.notebook
    assert gpu_work(LESSONS[1], GPU_BUDGET, plan_resources({"CPU": 8.0}, GPU_BUDGET)) == []


@pytest.mark.parametrize("kind", ["T4", "V100", "A10G", "L4", "A100", "H100"])
def test_the_gpu_budget_fits_one_gpu_of_each_kind_people_have(kind):
    for notebook, found in estimates_on(1, kind).items():
        for e in found:
            assert e.fits and e.total_gib <= GPUS[kind].memory_gib, (notebook, e.work.what, round(e.total_gib, 1))


def test_a_node_of_8_gives_every_gpu_work_and_is_faster_than_one():
    one, eight = estimates_on(1, "H100"), estimates_on(8, "H100")
    for notebook in ("04_cifar10_pytorch_to_ray", "07_ray_tune"):  # the fine-tunes grow their batch instead
        assert gpu_summary(eight[notebook])[1] < gpu_summary(one[notebook])[1], notebook
    fine_tune = eight["02_ray_train_finetune"][0]
    assert fine_tune.work.batch == GPU_BUDGET.beans.batch_size  # a full batch per GPU, not 32 / 8


def test_a_plan_that_does_not_fit_is_refused_with_the_setting_that_makes_it_fit():
    too_big = replace(GPU_BUDGET, cifar=replace(GPU_BUDGET.cifar, batch_size=2048))
    found = estimates_on(1, "T4", too_big)["04_cifar10_pytorch_to_ray"]
    refused = [e for e in found if not e.fits]
    assert refused
    fix = refit(refused[0])
    assert "cifar.batch_size" in fix and "course/budget.py" in fix
    most = int(fix.split(" to ")[1].split(" ")[0])
    assert estimates_on(1, "T4", replace(GPU_BUDGET, cifar=replace(GPU_BUDGET.cifar, batch_size=most)))[
        "04_cifar10_pytorch_to_ray"
    ][0].fits


def test_the_gpu_is_known_by_rays_accelerator_type_or_by_its_measured_memory():
    assert gpu_of(cluster(8, "A100-80G")).memory_gib == 80 and gpu_of(cluster(1, "T4")).name == "T4"
    assert gpu_of({"CPU": 8.0, "GPU": 1.0}, memory_gib=23.6).memory_gib == 23.6
    assert gpu_of({"CPU": 8.0, "GPU": 1.0}).memory_gib == GPUS["T4"].memory_gib  # unknown: the smallest
    assert gpu_of({"CPU": 8.0}) is None
    assert gpu_of({"CPU": 8.0, "GPU": 1.0}, memory_gib=11.5).compute_capability >= (7, 0)  # an RTX 3060, not a K80


def test_every_nvidia_gpu_that_ray_names_is_known_and_an_h200_trains_in_bf16():
    import ray.util.accelerators.accelerators as ray_types

    named = {getattr(ray_types, name) for name in dir(ray_types) if name.startswith("NVIDIA_")}
    assert named - set(GPUS) == set(), "a GPU type Ray names is missing from resources.GPUS: it would be taken for a T4"
    assert gpu_of(cluster(1, "H200")).mixed_precision == "bf16"  # it was planned as fp16 on one H200 (2026-11-26)
    assert gpu_of(cluster(1, "T4")).mixed_precision == "fp16"


# --- make doctor ---------------------------------------------------------------------------------------------------


def rows(resources, monkeypatch, budget=None):
    monkeypatch.delenv("COURSE_BUDGET", raising=False)
    if budget is not None:
        monkeypatch.setitem(course.budget._BUDGETS, "gpu", budget)
    return {row.name: row for row in plan_rows(resources, 1.0)}


def test_doctor_prints_each_lessons_gpu_memory_and_time_for_the_cluster_it_sees(monkeypatch):
    found = rows(cluster(1, "T4"), monkeypatch)
    assert all(row.ok for row in found.values())
    assert "GPU" in found["04"].found and "of 15 GiB" in found["04"].found and "batch 512" in found["04"].found
    assert "T4" in found["estimate"].found and "fp16" in found["estimate"].found
    assert "bf16" in rows(cluster(8, "H100"), monkeypatch)["estimate"].found
    assert "GPU" not in rows({"CPU": 8.0}, monkeypatch)["04"].found  # no GPU, no GPU estimate


def test_doctor_refuses_a_plan_that_does_not_fit_and_names_the_setting(monkeypatch):
    too_big = replace(GPU_BUDGET, cifar=replace(GPU_BUDGET.cifar, batch_size=2048))
    found = rows(cluster(1, "T4"), monkeypatch, too_big)
    refused = [row for row in found.values() if not row.ok]
    assert [row.name for row in refused] == ["04", "07"], [row.lines() for row in refused]
    assert "does not fit a T4" in found["04"].found and "cifar.batch_size" in found["04"].fix
    assert all(row.ok for row in rows(cluster(8, "H100"), monkeypatch, too_big).values())  # 8 x 80 GiB: it fits
