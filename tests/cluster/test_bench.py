"""`make bench`: its summaries on their own, then the quick mode on the course's cluster."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course import benchmark
from helpers.loops import train_epoch
from helpers.vit import VisionTransformer, architecture_named

ROOT = Path(__file__).resolve().parents[2]


def test_the_warm_up_stays_out_of_the_steady_state() -> None:
    epochs = [benchmark.Epoch(10.0, 9.0, 100), benchmark.Epoch(1.0, 0.1, 100), benchmark.Epoch(2.0, 0.1, 100)]
    figures = benchmark.summary(epochs, workers=2)
    assert figures["warm_up_s"] == 10.0 and figures["first_batch_s"] == 9.0
    assert figures["images_per_s"] == pytest.approx(150.0)  # median of 200 and 100 images/s, two workers
    assert (figures["images_per_s_min"], figures["images_per_s_max"]) == (100.0, 200.0)
    with pytest.raises(ValueError, match="warm-up"):
        benchmark.summary(epochs[:1])


def test_timed_epochs_time_the_first_batch_and_count_images() -> None:
    batches = [(torch.zeros(3, 1), torch.zeros(3)), (torch.zeros(2, 1), torch.zeros(2))]
    epochs = benchmark.timed_epochs(lambda epoch: batches, benchmark.discard, 2)
    assert [epoch.images for epoch in epochs] == [5, 5]
    assert all(0 <= epoch.first_batch_s <= epoch.seconds for epoch in epochs)


def test_a_loop_and_a_pool_are_timed_the_same_way() -> None:
    def run():  # two batches done 0.5 s apart, the first after a start-up
        now = __import__("time").time()
        yield [now + 1.0] * 4
        yield [now + 1.5] * 6

    (figures,) = benchmark.timed_runs(run, 1)
    assert figures["images"] == 10
    assert figures["startup_s"] == pytest.approx(1.0, abs=0.05)
    assert figures["images_per_s"] == pytest.approx(12.0, rel=0.01)  # 6 images in 0.5 s after the first batch


def test_the_pool_pays_off_only_when_its_steady_rate_is_higher() -> None:
    loop = {"images_per_s": 100.0, "startup_s": 1.0}
    assert benchmark.crossover_images(loop, {"images_per_s": 90.0, "startup_s": 5.0}) is None
    # 9 s more start-up, 0.005 s less per image: 1,800 images
    assert benchmark.crossover_images(loop, {"images_per_s": 200.0, "startup_s": 10.0}) == pytest.approx(1800.0)


def test_bf16_training_runs_on_a_cpu_too() -> None:
    model = VisionTransformer(architecture_named("small"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [(torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,)))]
    loss = train_epoch(model, batches, optimizer, torch.device("cpu"), progress=False, autocast=torch.bfloat16)
    assert math.isfinite(loss)


@pytest.mark.cluster
@pytest.mark.course_size  # a whole `make bench QUICK=1`, minutes of training: weekly, beside the course size
def test_the_quick_bench_produces_every_figure(tmp_path: Path) -> None:
    """Every figure there, positive, each ratio from the same run's figures: not whether it is fast."""
    if not os.environ.get("RAY_ADDRESS"):
        pytest.skip("needs the course's cluster: make test starts it")
    done = subprocess.run(
        [sys.executable, "scripts/bench.py", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "bench.json").read_text())
    sides = {
        "ingest": list(benchmark.DATA_PATHS),
        "inference": ["hand loop", "actor pool"],
    }
    for part, names in sides.items():
        assert sorted(report[part]) == sorted(names)
        for figures in report[part].values():
            assert figures["images_per_s"] > 0 and figures["images_per_s_min"] <= figures["images_per_s_max"]
    training = report["training"]
    assert training["startup_s"] > 0 and training["fit_s"] > training["startup_s"]
    for path in benchmark.DATA_PATHS:
        figures = training["paths"][f"{path}/fp32"]
        assert figures["images_per_s"] > 0 and figures["first_batch_s"] > 0 and figures["warm_up_s"] > 0
    first_epoch = training["paths"]["streaming/fp32"]["new_workers_first_epoch"]
    assert isinstance(first_epoch, int) and first_epoch >= 0, "the course's cluster has a state API: a count"
    table = (tmp_path / "bench.md").read_text()
    assert "worker processes started during it" in table and "First streaming epoch: first batch after" in table
    preloaded = training["paths"]["preloaded/fp32"]["images_per_s"]
    streaming = training["paths"]["streaming/fp32"]["images_per_s"]
    assert "| training fp32 | streaming |" in table
    row = next(line for line in table.splitlines() if line.startswith("| training fp32 | streaming |"))
    assert row.rstrip(" |").endswith(f"{streaming / preloaded:.2f}")  # the ratio of this run's own figures
    assert report["machine"]["cluster"]["CPU"] > 0 and "gpu" not in report  # no GPU here: no GPU run
    assert (tmp_path / "bench.png").stat().st_size > 10_000
    assert "ReadParquet" in (tmp_path / "ray-data-stats.txt").read_text()
    imported = report["tracking"]
    assert 0 < imported["import_s_min"] <= imported["import_s"] <= imported["import_s_max"]
    assert "Tracking: MLflow's import in a fresh Ray worker" in table and imported["tries"] >= 2


def test_on_gpus_the_bench_trains_in_the_16_bits_the_gpu_computes_natively() -> None:
    """bf16 on an A100 or H100; fp16 on a T4 or V100, where bf16 would be emulated (and slower than fp32)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench

    from course.budget import get_budget
    from course.resources import GPUS, plan_resources

    budget = get_budget(kind="gpu")
    for name, expected in (("T4", "fp16"), ("V100", "fp16"), ("A100", "bf16"), ("H100", "bf16")):
        plan = plan_resources({"CPU": 16.0, "GPU": 1.0}, budget)
        settings = bench.settings_for(budget, plan, 50_000, quick=True, mixed=GPUS[name].mixed_precision)
        assert settings.precisions == ("fp32", expected), name
        assert all(p in benchmark.PRECISIONS for p in settings.precisions)
    on_cpus = bench.settings_for(budget, plan_resources({"CPU": 8.0}, budget), 50_000, quick=True)
    assert on_cpus.precisions == ("fp32",)
