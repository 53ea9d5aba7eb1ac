"""`make bench`: how fast the course's data paths, training and batch inference are on this cluster.

    make bench                                   # the local 2-node cluster (or the one in RAY_ADDRESS)
    make bench QUICK=1                           # a small run: every figure once, not their spread

Side by side in one run, with notebook 04's model, images, batch size and workers (its budget):

* ingest alone: images per second handed to a consumer that does nothing, from a DataLoader over
  preloaded arrays, from Ray Data over a materialized dataset, and from a streaming dataset that reads and
  normalises every epoch;
* training: the same model trained by the same Ray Train workers from each of the three, the time to the
  first batch and the steady images per second (on GPUs: in fp32 with TF32 and in bf16, fp16 where the GPU has no
  native bf16, next to the seeds' T4 figure);
* batch inference: an actor pool (``map_batches``) against a loop written by hand in one process;
* tracking: the seconds MLflow's import adds to a fresh Ray worker that has torch and Ray Train loaded, as rank 0 of a
  training lesson imports it (course.tracking), against a target of a second.

The first epoch or run of each side is its warm-up, reported apart; every steady figure is the median
of the repetitions after it (min and max beside it). Writes results/bench/: bench.json (every figure and
the machine), bench.md (the table) and bench.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pyarrow.dataset
import ray
import ray.data
import torch
from ray.train import ScalingConfig
from ray.train.torch import TorchTrainer

from course import benchmark, config
from course.budget import Budget, get_budget
from course.cluster import configure_ray_data, init_ray
from course.distributed import torch_config
from course.lessons import lesson_named
from course.resources import cluster_gpus, gpu_of, plan_resources
from course.sources import get_sources, require_data
from course.storage import filesystem
from helpers.cifar import loaders, normalize_batch
from helpers.train import per_worker, run_config
from helpers.vit import architecture_named, count_parameters

OUT = config.RESULTS_DIR / "bench"
LESSON = lesson_named("04_cifar10_pytorch_to_ray")  # the lesson whose model, data and budget section it measures
SEEDS_T4_EPOCH_S = 130.0  # the seeds' tutorial: 2 min 10 s per CIFAR-10 epoch on one T4, its 14.3 M-parameter ViT
CIFAR10_TRAIN_IMAGES = 50_000
FIRST_STREAMING_BATCH_TARGET_S = 2.0  # the first batch of the first streaming epoch, on the local cluster
# The GPU targets (issue 40; not yet measured: no GPU has run the bench): notebook 04's 50,000-image epoch on one H100,
# and the course's ViT-B/16 batch inference per GPU in bf16 (Ray Data's release figure for image inference).
H100_EPOCH_TARGET_S = {"fp32": 9.0, "bf16": 3.0}
VIT_B16_INFERENCE_TARGET_PER_GPU = 900  # images per second per GPU, bf16
TRACKING_IMPORT_TARGET_S = 1.0  # MLflow's import may add at most a second to a lesson's start-up (issue 79)


@dataclass(frozen=True)
class Settings:
    """What every side of the bench runs with."""

    architecture: str
    images: int  # training images per epoch (all workers together)
    batch_size: int  # per worker, per consumer, per inference batch
    learning_rate: float
    num_workers: int  # Ray Train workers, and actors of the inference pool
    use_gpu: bool
    repeats: int  # measured epochs (or runs) after the warm-up
    inference_images: int
    precisions: tuple[str, ...]
    shuffle_buffer: int  # rows of Ray Data's local shuffle buffer (0: no shuffle)


def settings_for(budget: Budget, plan, available_images: int, quick: bool, mixed: str = "bf16") -> Settings:
    """The knobs of the lesson the bench measures (:data:`LESSON`, notebook 04), from its section of the budget;
    ``quick`` keeps them but shrinks the work. ``mixed``: the 16-bit precision the cluster's GPU computes natively
    (``Gpu.mixed_precision``: fp16 on a T4 or V100, where bf16 would be emulated)."""
    cifar = getattr(budget, LESSON.budget)
    images = min(cifar.train_size or available_images, available_images)
    settings = Settings(
        architecture=cifar.architecture,
        images=images,
        batch_size=per_worker(cifar.batch_size, plan.num_workers),
        learning_rate=cifar.learning_rate,
        num_workers=plan.num_workers,
        use_gpu=plan.use_gpu,
        repeats=3,
        inference_images=images,
        precisions=("fp32", mixed) if plan.use_gpu else ("fp32",),  # 16 bits are 10x slower on CPUs
        shuffle_buffer=cifar.shuffle_buffer,
    )
    if quick:  # every figure once, on few images
        settings = replace(settings, images=256, inference_images=512, repeats=1)
    return settings


def measure_ingest(
    uri: str, settings: Settings, datasets: dict[str, ray.data.Dataset], setup_s: float
) -> dict[str, dict]:
    """Ingest alone, in this process: each data path handing batches to a consumer that does nothing.

    ``datasets``: :func:`benchmark.ray_datasets`, built in ``setup_s`` (the materialized one's reading and
    normalising), shared with :func:`measure_training`."""
    epochs = settings.repeats + 1
    size, buffer = settings.batch_size, settings.shuffle_buffer
    start = time.perf_counter()
    loader, _ = loaders(uri, size, settings.images, 1)
    figures = {"preloaded": {"setup_s": time.perf_counter() - start}}
    figures["preloaded"] |= benchmark.summary(benchmark.timed_epochs(lambda epoch: loader, benchmark.discard, epochs))
    for path, dataset in datasets.items():
        runs = benchmark.timed_epochs(
            lambda epoch, dataset=dataset: benchmark.ray_batches(dataset, size, buffer, epoch),
            benchmark.discard,
            epochs,
        )
        figures[path] = {"setup_s": setup_s if path != "streaming" else 0.0} | benchmark.summary(runs)
    return figures


def measure_training(uri: str, settings: Settings, datasets: dict[str, ray.data.Dataset]) -> dict:
    """Every data path trained by the same Ray Train workers, one after the other, in one fit."""
    loop_config = {
        "uri": uri,
        "images": settings.images,
        "batch_size": settings.batch_size,
        "lr": settings.learning_rate,
        "architecture": asdict(architecture_named(settings.architecture)),
        "precisions": list(settings.precisions),
        "epochs": settings.repeats + 1,
        "shuffle_buffer": settings.shuffle_buffer,
        "data_paths": list(benchmark.DATA_PATHS),
    }
    fit_start = time.time()
    result = TorchTrainer(
        benchmark.train_data_paths,
        train_loop_config=loop_config,
        datasets=datasets,
        scaling_config=ScalingConfig(num_workers=settings.num_workers, use_gpu=settings.use_gpu),
        torch_config=torch_config(),
        run_config=run_config("bench"),
    ).fit()
    fit_s = time.time() - fit_start
    measured = benchmark.measured_in(result.checkpoint)
    figures = {}
    for key, run in measured.items():
        if key in ("ray_data_stats", "started"):
            continue
        epochs = [benchmark.Epoch(**epoch) for epoch in run["epochs"]]
        figures[key] = benchmark.summary(epochs, workers=settings.num_workers) | {
            "first_batch_s": run["setup_s"] + epochs[0].first_batch_s,
            "new_workers_first_epoch": benchmark.workers_started_between(*run["first_epoch_window"]),
        }
    return {
        "fit_s": fit_s,
        "startup_s": measured["started"] - fit_start,
        "paths": figures,
        "ray_data_stats": measured.get("ray_data_stats", {}),
    }


def measure_inference(uri: str, settings: Settings, plan) -> dict[str, dict]:
    """Batch inference on the same images: a hand loop in one process (a task with the pool's CPUs, or one
    GPU) against ``map_batches`` on a pool of ``num_workers`` actors."""
    arch = asdict(architecture_named(settings.architecture))
    runs = settings.repeats + 1
    # On CPUs the loop gets the pool's CPUs (torch uses them as threads), as many as one node has; on GPUs one GPU.
    largest_node = max(node["Resources"].get("CPU", 0) for node in ray.nodes() if node["Alive"])
    loop_cpus = 1 if settings.use_gpu else min(settings.num_workers, largest_node)
    loop_task = ray.remote(benchmark.hand_loop_runs).options(num_cpus=loop_cpus, num_gpus=1 if settings.use_gpu else 0)
    loop = ray.get(loop_task.remote(uri, settings.inference_images, arch, settings.batch_size, runs))

    def pool_run():
        images = ray.data.read_parquet(f"{uri}/train").limit(settings.inference_images)
        predictions = images.map_batches(normalize_batch).map_batches(
            benchmark.Classifier,
            fn_constructor_kwargs={"architecture": arch},
            batch_size=settings.batch_size,
            compute=ray.data.ActorPoolStrategy(size=settings.num_workers),
            num_gpus=plan.gpus_per_actor if settings.use_gpu else 0,
        )
        for batch in predictions.iter_batches(batch_size=None):
            yield batch["done_at"]

    pool = benchmark.timed_runs(pool_run, runs)
    return {"hand loop": benchmark.run_summary(loop), "actor pool": benchmark.run_summary(pool)}


def measure_tracking_import(repeats: int) -> dict[str, float]:
    """MLflow's import in a fresh Ray worker process each time (``max_calls=1``), torch and Ray Train already loaded:
    the median of ``repeats`` tries, with its spread."""
    task = ray.remote(benchmark.import_seconds).options(num_cpus=1, max_calls=1)
    seconds = sorted(ray.get(task.remote()) for _ in range(repeats))  # one at a time: none slows another
    return {
        "import_s": statistics.median(seconds),
        "import_s_min": seconds[0],
        "import_s_max": seconds[-1],
        "tries": repeats,
    }


def machine(resources: dict[str, float]) -> dict:
    """Where the bench ran: this machine, the cluster's resources, the versions that matter."""
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "driver_gpus": gpus,
        "cluster": {name: value for name, value in resources.items() if "node:" not in name},
        "torch": torch.__version__,
        "ray": ray.__version__,
    }


def ratios(figures: dict[str, dict], reference: str) -> dict[str, float]:
    """Each side's steady images per second as a fraction of ``reference``'s, all from this run."""
    base = figures[reference]["images_per_s"]
    return {side: values["images_per_s"] / base for side, values in figures.items()}


def gpu_figures(training: dict, settings: Settings) -> dict[str, dict]:
    """On GPUs: seconds per full CIFAR-10 epoch and images per second per GPU, next to the seeds' T4."""
    out = {
        "seeds T4 (fp32)": {
            "epoch_s": SEEDS_T4_EPOCH_S,
            "images_per_s_per_gpu": CIFAR10_TRAIN_IMAGES / SEEDS_T4_EPOCH_S,
        }
    }
    for precision in settings.precisions:
        rate = training["paths"][f"preloaded/{precision}"]["images_per_s"]
        out[f"{settings.num_workers} GPU(s), {precision}"] = {
            "epoch_s": CIFAR10_TRAIN_IMAGES / rate,
            "images_per_s_per_gpu": rate / settings.num_workers,
        }
    return out


def rows(report: dict) -> list[tuple[str, str, float, float, float, float, float]]:
    """(part, side, start-up s, images/s, min, max, ratio) for every figure of the report."""
    out = []
    ingest_ratio = ratios(report["ingest"], "preloaded")
    for side, fig in report["ingest"].items():
        out.append(("ingest", side, fig["first_batch_s"] + fig["setup_s"], *_rate(fig), ingest_ratio[side]))
    for precision in report["settings"]["precisions"]:
        paths = {path: report["training"]["paths"][f"{path}/{precision}"] for path in benchmark.DATA_PATHS}
        train_ratio = ratios(paths, "preloaded")
        for side, fig in paths.items():
            out.append((f"training {precision}", side, fig["first_batch_s"], *_rate(fig), train_ratio[side]))
    inference_ratio = ratios(report["inference"], "hand loop")
    for side, fig in report["inference"].items():
        out.append(("batch inference", side, fig["startup_s"], *_rate(fig), inference_ratio[side]))
    return out


def _rate(figure: dict) -> tuple[float, float, float]:
    return figure["images_per_s"], figure["images_per_s_min"], figure["images_per_s_max"]


def markdown(report: dict) -> str:
    """The report as a markdown table, with what it ran on and the warm-ups."""
    s, m = report["settings"], report["machine"]
    lines = [
        f"`make bench{' QUICK=1' if report['quick'] else ''}` on {m['host']} ({m['platform']}, {m['cpu_count']} CPUs; "
        f"cluster {m['cluster'].get('CPU', 0):g} CPUs, {m['cluster'].get('GPU', 0):g} GPUs), {report['date']}.",
        f"{s['architecture']} ViT ({report['parameters'] / 1e6:.2f} M parameters), {s['images']} images, batch "
        f"{s['batch_size']} per worker, {s['num_workers']} workers/actors, median of {s['repeats']} after a warm-up.",
        "",
        "| part | side | first batch (s) | images/s (median) | min–max | ratio |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for part, side, first, rate, low, high, ratio in rows(report):
        lines.append(f"| {part} | {side} | {first:.1f} | {rate:,.0f} | {low:,.0f}–{high:,.0f} | {ratio:.2f} |")
    t = report["training"]
    lines += [
        "",
        f"Training: one fit of {t['fit_s']:.0f} s for all sides; Ray Train's start-up (fit to the workers' first "
        f"line) {t['startup_s']:.1f} s, paid once, in no figure above. First batch: from the side's set-up (load, "
        "or the shard) to its first batch. Ratios: to preloaded (ingest, training), to the hand loop (inference).",
    ]
    streaming = t["paths"][f"streaming/{s['precisions'][0]}"]
    new_workers = streaming.get("new_workers_first_epoch")
    on_target = streaming["first_batch_s"] <= FIRST_STREAMING_BATCH_TARGET_S and new_workers == 0
    lines.append(
        f"First streaming epoch: first batch after {streaming['first_batch_s']:.1f} s, "
        + ("? (no state API)" if new_workers is None else str(new_workers))
        + f" worker processes started during it ({'✓' if on_target else '✗'} target: within "
        f"{FIRST_STREAMING_BATCH_TARGET_S:g} s, none started: Train's workers and their Ray Data tasks reuse the "
        "job's idle workers, course.cluster.CompactRuntimeEnv)."
    )
    crossover = report["inference_crossover_images"]
    lines.append(
        "Batch inference: the pool overtakes the hand loop after "
        + (
            f"about {crossover:,.0f} images."
            if crossover
            else "no number of images at this size (its steady rate is not higher)."
        )
    )
    imported = report["tracking"]
    lines.append(
        f"Tracking: MLflow's import in a fresh Ray worker that has torch and Ray Train loaded: "
        f"{imported['import_s']:.2f} s, median of {imported['tries']} ({imported['import_s_min']:.2f}–"
        f"{imported['import_s_max']:.2f}); {'✓' if imported['import_s'] <= TRACKING_IMPORT_TARGET_S else '✗'} target: "
        f"within {TRACKING_IMPORT_TARGET_S:g} s, what rank 0 adds to a lesson's start-up (course.tracking)."
    )
    if report.get("gpu"):
        lines += ["", "| GPU run | s per 50,000-image epoch | images/s per GPU |", "|---|---:|---:|"]
        for name, fig in report["gpu"].items():
            lines.append(f"| {name} | {fig['epoch_s']:.1f} | {fig['images_per_s_per_gpu']:,.0f} |")
        targets = ", ".join(f"{seconds:g} s in {p}" for p, seconds in H100_EPOCH_TARGET_S.items())
        lines.append(
            f"Targets on one H100: an epoch in {targets} (fp32 with TF32); ViT-B/16 batch inference "
            f"{VIT_B16_INFERENCE_TARGET_PER_GPU} images/s per GPU in bf16 (not measured by this bench yet)."
        )
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    """One figure: steady images per second of every side, grouped by part, min–max as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = rows(report)
    parts = list(dict.fromkeys(row[0] for row in table))
    fig, axes = plt.subplots(1, len(parts), figsize=(3.2 * len(parts), 3.4))
    for ax, part in zip(axes, parts, strict=True):
        mine = [row for row in table if row[0] == part]
        rates = [row[3] for row in mine]
        errors = [[row[3] - row[4] for row in mine], [row[5] - row[3] for row in mine]]
        colors = [f"C{i}" for i in range(len(mine))]
        ax.bar([row[1] for row in mine], rates, yerr=errors, capsize=4, color=colors)
        ax.set(title=part, ylabel="images / s")
        ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small run: every figure once (the tests use it)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write the report (default {OUT})")
    args = parser.parse_args(argv)

    sources = get_sources()
    require_data(sources)
    resources = init_ray()
    configure_ray_data()
    budget = get_budget(cluster_gpus(resources))
    plan = plan_resources(resources, budget)
    fs, root = filesystem(f"{sources.cifar10}/train")
    available = pyarrow.dataset.dataset(root, filesystem=fs, format="parquet").count_rows()  # from the footers
    gpu = gpu_of(resources)
    settings = settings_for(budget, plan, available, args.quick, gpu.mixed_precision if gpu else "bf16")
    print(f"bench: {settings}", flush=True)
    started = time.perf_counter()
    report: dict = {
        "quick": args.quick,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "sources": sources.kind,
        "budget": budget.kind,
        "settings": asdict(settings),
        "parameters": count_parameters(benchmark.VisionTransformer(architecture_named(settings.architecture))),
        "machine": machine(resources),
    }
    print("ingest alone ...", flush=True)
    start = time.perf_counter()
    datasets = benchmark.ray_datasets(sources.cifar10, settings.images)  # materializes the materialized one, once
    report["ingest"] = measure_ingest(sources.cifar10, settings, datasets, time.perf_counter() - start)
    print("training (one fit, every data path) ...", flush=True)
    report["training"] = measure_training(sources.cifar10, settings, datasets)
    print("batch inference ...", flush=True)
    report["inference"] = measure_inference(sources.cifar10, settings, plan)
    report["inference_crossover_images"] = benchmark.crossover_images(
        report["inference"]["hand loop"], report["inference"]["actor pool"]
    )
    print("tracking (MLflow's import on a worker) ...", flush=True)
    report["tracking"] = measure_tracking_import(settings.repeats + 1)
    if settings.use_gpu:
        report["gpu"] = gpu_figures(report["training"], settings)
    report["bench_s"] = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    stats = report["training"].pop("ray_data_stats")
    (args.out / "ray-data-stats.txt").write_text("".join(f"== {path}\n{text}\n\n" for path, text in stats.items()))
    (args.out / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "bench.md").write_text(markdown(report))
    plot(report, args.out / "bench.png")
    print(markdown(report))
    print(f"written: {args.out}/bench.json, bench.md, bench.png, ray-data-stats.txt ({report['bench_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
