"""`make bench`'s measurements: timed epochs of ingest, training and batch inference, and their summaries.

Every side of a comparison runs the same work: the same images, model, batch size and number of
workers. The first epoch (or run) of each side is the warm-up: it is reported on its own (time to the
first batch), never mixed into the steady state, which is the median of the repetitions after it.
``scripts/bench.py`` runs these on a cluster and writes the report.
"""

from __future__ import annotations

import collections
import json
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import ray
import ray.train
import ray.train.torch
import torch

from course.resources import device
from helpers.cifar import load_split, loaders, normalize, normalize_batch
from helpers.loops import pairs, report_epoch, train_epoch
from helpers.vit import Architecture, VisionTransformer

# How the images reach the consumer: a DataLoader over arrays loaded and normalised once ("preloaded"); Ray Data
# over blocks read and normalised once ("materialized"); Ray Data that reads and normalises every epoch
# ("streaming", notebook 04's Ray Data step).
DATA_PATHS = ("preloaded", "materialized", "streaming")
MEASURED_FILE = "measured.json"
# fp32 may use TF32 on GPUs that have it; bf16 where the GPU computes it natively (8.0 and later), fp16 on the others
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Epoch:
    """One timed pass: wall seconds, seconds until the first batch arrived, images seen."""

    seconds: float
    first_batch_s: float
    images: int

    @property
    def images_per_s(self) -> float:
        return self.images / self.seconds


class Timed:
    """Wraps batches of (images, labels): notes when the first one arrives and counts the images."""

    def __init__(self, batches: Iterable) -> None:
        self.batches, self.images, self.first_batch_s = batches, 0, float("nan")

    def __iter__(self) -> Iterator:
        start = time.perf_counter()
        for images, labels in self.batches:
            if self.images == 0:
                self.first_batch_s = time.perf_counter() - start
            self.images += len(labels)
            yield images, labels


def timed_epochs(
    batches_for: Callable[[int], Iterable], consume: Callable[[Iterable], object], epochs: int
) -> list[Epoch]:
    """``epochs`` passes of ``consume(batches_for(epoch))``, each timed from the request of its first batch."""
    out = []
    for epoch in range(epochs):
        start = time.perf_counter()
        timed = Timed(batches_for(epoch))
        consume(timed)
        out.append(Epoch(time.perf_counter() - start, timed.first_batch_s, timed.images))
    return out


def discard(batches: Iterable) -> None:
    """The consumer that does nothing: ingest alone."""
    collections.deque(batches, maxlen=0)


def summary(epochs: list[Epoch], workers: int = 1) -> dict[str, float]:
    """Warm-up (the first epoch) apart from the steady state (the median of the others, with min and max).

    Images per second are for the whole group of ``workers``, each of which saw ``images`` in an epoch.
    """
    if len(epochs) < 2:
        raise ValueError("a summary needs a warm-up epoch and at least one more")
    warm_up, steady = epochs[0], epochs[1:]
    return {
        "warm_up_s": warm_up.seconds,
        "first_batch_s": warm_up.first_batch_s,
        "epoch_s": statistics.median(epoch.seconds for epoch in steady),
        **spread([epoch.images_per_s * workers for epoch in steady]),
    }


def spread(rates: list[float]) -> dict[str, float]:
    """The steady figure of some repetitions: their median images per second, with min and max beside it."""
    return {
        "images_per_s": statistics.median(rates),
        "images_per_s_min": min(rates),
        "images_per_s_max": max(rates),
        "repeats": len(rates),
    }


def ray_datasets(uri: str, images: int) -> dict[str, ray.data.Dataset]:
    """The Ray Data paths of :data:`DATA_PATHS` over the first ``images`` training images."""
    read = ray.data.read_parquet(f"{uri}/train").limit(images)
    return {
        "materialized": read.map_batches(normalize_batch).materialize(),
        "streaming": read.map_batches(normalize_batch),
    }


def ray_batches(shard, batch_size: int, shuffle_buffer: int, epoch: int) -> Iterator:
    """(images, labels) batches of a Ray Data shard or dataset for one epoch, shuffled like notebook 04's."""
    return pairs(
        shard.iter_torch_batches(
            batch_size=batch_size, local_shuffle_buffer_size=shuffle_buffer or None, local_shuffle_seed=epoch
        )
    )


def train_data_paths(loop_config: dict) -> None:
    """A Ray Train worker function: the same model trained from each data path in turn, every epoch timed.

    ``loop_config``: uri, images, batch_size (per worker), lr, architecture (dict), precisions (names), epochs
    (warm-up included), shuffle_buffer, data_paths. The datasets "materialized" and "streaming" are passed
    to the trainer. Reports, from every worker, each (data path, precision)'s epochs; rank 0's come back.
    """
    started = time.time()
    context = ray.train.get_context()
    device = ray.train.torch.get_device()
    batch_size, epochs = loop_config["batch_size"], loop_config["epochs"]
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    measured: dict[str, dict] = {}
    # The shards up front, as a training function would: each starts its split coordinator (an actor importing Ray
    # Data) now, while the first path trains, not when its own turn comes.
    shards = {path: ray.train.get_dataset_shard(path) for path in loop_config["data_paths"] if path != "preloaded"}
    for precision in loop_config["precisions"]:
        for data_path in loop_config["data_paths"]:
            torch.manual_seed(0)
            model = ray.train.torch.prepare_model(VisionTransformer(Architecture(**loop_config["architecture"])))
            optimizer = torch.optim.AdamW(model.parameters(), lr=loop_config["lr"], weight_decay=1e-2)
            setup_start = time.perf_counter()
            if data_path == "preloaded":
                loader, _ = loaders(loop_config["uri"], batch_size, loop_config["images"], 1)
                loader = ray.train.torch.prepare_data_loader(loader)

                def batches_for(epoch: int, loader=loader) -> Iterable:
                    if context.get_world_size() > 1:
                        loader.sampler.set_epoch(epoch)
                    return loader
            else:
                shard = shards[data_path]

                def batches_for(epoch: int, shard=shard) -> Iterable:
                    return ray_batches(shard, batch_size, loop_config["shuffle_buffer"], epoch)

            setup_s = time.perf_counter() - setup_start

            def consume(batches: Iterable, model=model, optimizer=optimizer, precision=precision) -> float:
                return train_epoch(model, batches, optimizer, device, progress=False, autocast=PRECISIONS[precision])

            began = time.time()  # wall clock: the first epoch's window, to find worker processes started in it
            runs = timed_epochs(batches_for, consume, epochs)
            measured[f"{data_path}/{precision}"] = {
                "setup_s": setup_s,
                "epochs": [asdict(run) for run in runs],
                "first_epoch_window": [began, began + runs[0].seconds],
            }
            if context.get_world_rank() == 0:
                seconds = ", ".join(f"{run.seconds:.1f}" for run in runs)
                print(f"  training {data_path}, {precision}: set-up {setup_s:.1f} s, epochs {seconds} s", flush=True)
            if data_path != "preloaded" and precision == loop_config["precisions"][0]:
                measured.setdefault("ray_data_stats", {})[data_path] = shards[data_path].stats()
    measured |= {"started": started}
    report_epoch(
        {"rank": context.get_world_rank()},
        save=lambda folder: (folder / MEASURED_FILE).write_text(json.dumps(measured)),
    )


def workers_started_between(start: float, end: float) -> int | None:
    """How many worker processes Ray started between the wall-clock times ``start`` and ``end`` (the state API's
    launch times); None where the cluster has no state API (no dashboard)."""
    from ray.util.state import list_workers

    try:
        workers = list_workers(detail=True, limit=10_000, raise_on_missing_output=False)
    except Exception:
        return None
    launched = [w.worker_launch_time_ms / 1000 for w in workers if w.worker_type == "WORKER"]
    return sum(start <= t <= end for t in launched if t)


def measured_in(checkpoint: ray.train.Checkpoint) -> dict:
    """What :func:`train_data_paths` measured on rank 0 (a checkpoint carries it: Ray Train keeps the metrics
    of reports that come with one)."""
    with checkpoint.as_directory() as folder:
        return json.loads((Path(folder) / MEASURED_FILE).read_text())


class Classifier:
    """The batch-inference model: normalised images in, predicted label ids out (``map_batches`` builds one
    per actor of its pool; the hand loop calls one itself)."""

    def __init__(self, architecture: dict) -> None:
        torch.manual_seed(0)
        self.device = device()  # a GPU only where Ray gave this actor one
        self.model = VisionTransformer(Architecture(**architecture)).to(self.device).eval()

    @torch.inference_mode()
    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        logits = self.model(torch.from_numpy(batch["image"]).to(self.device))
        label_ids = logits.argmax(-1).cpu().numpy()
        return {"label": label_ids, "done_at": np.full(len(label_ids), time.time())}


def hand_loop(uri: str, images: int, architecture: dict, batch_size: int) -> Iterator[np.ndarray]:
    """Batch inference written by hand in one process: read, then normalise and predict batch after batch.

    Yields, per batch, the time each image's prediction was done (as the pool's :class:`Classifier` does)."""
    pixels, _ = load_split(uri, "train", images)
    classify = Classifier(architecture)
    for start in range(0, len(pixels), batch_size):
        yield classify({"image": normalize(pixels[start : start + batch_size])})["done_at"]


def hand_loop_runs(uri: str, images: int, architecture: dict, batch_size: int, runs: int) -> list[dict[str, float]]:
    """:func:`timed_runs` of :func:`hand_loop` (to run as one Ray task: one process, its own CPUs or GPU)."""
    return timed_runs(lambda: hand_loop(uri, images, architecture, batch_size), runs)


def timed_runs(run: Callable[[], Iterable[np.ndarray]], runs: int) -> list[dict[str, float]]:
    """``runs`` timed passes of ``run()``, which yields the times (``time.time()``) its images were done.

    Each pass: its start-up (seconds until the first batch was done), its steady rate (images per second
    from the first batch done to the last) and its end-to-end rate. Same definitions for a loop and a pool."""
    out = []
    for _ in range(runs):
        start = time.time()
        done_at = np.concatenate(list(run()))
        seconds = time.time() - start
        first, last = done_at.min(), done_at.max()
        after_first = int((done_at > first).sum())
        out.append(
            {
                "startup_s": float(first - start),
                "images_per_s": after_first / (last - first) if last > first else float("nan"),
                "end_to_end_per_s": len(done_at) / seconds,
                "images": len(done_at),
            }
        )
    return out


def run_summary(runs: list[dict[str, float]]) -> dict[str, float]:
    """The first pass as warm-up, the median (min, max) of the others: as :func:`summary`, for whole runs."""
    if len(runs) < 2:
        raise ValueError("a summary needs a warm-up run and at least one more")
    steady = runs[1:]
    return {
        "warm_up_startup_s": runs[0]["startup_s"],
        "startup_s": statistics.median(run["startup_s"] for run in steady),
        "end_to_end_per_s": statistics.median(run["end_to_end_per_s"] for run in steady),
        "images": steady[0]["images"],
        **spread([run["images_per_s"] for run in steady]),
    }


def crossover_images(loop: dict[str, float], pool: dict[str, float]) -> float | None:
    """How many images the actor pool needs to finish before the hand loop: its start-up paid back by its
    faster steady rate; None when it is not faster (more actors, or GPUs, change that)."""
    if pool["images_per_s"] <= loop["images_per_s"]:
        return None
    extra_startup = max(0.0, pool["startup_s"] - loop["startup_s"])
    return extra_startup / (1 / loop["images_per_s"] - 1 / pool["images_per_s"])


# --- what tracking costs a worker ------------------------------------------------------------------------------


def import_seconds(module: str = "mlflow") -> float:
    """The seconds that importing ``module`` takes in this process, which has torch and Ray Train loaded already (this
    module imports them, as a Ray Train worker has before its training function logs): what rank 0 pays to import
    MLflow (course.tracking) in a lesson's start-up. Run it in a fresh worker process each time (``max_calls=1``)."""
    import importlib

    start = time.perf_counter()
    importlib.import_module(module)
    return time.perf_counter() - start
