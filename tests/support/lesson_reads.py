"""Each lesson's reads of its declared sources, the way its notebook goes through them, in a process of its own: a
kernel's, with the environment the real-sources rehearsal gives its kernels (tests/cluster/test_real_sources.py
starts it, with the stand-ins of the Hub and S3 serving).

For a lesson it lists what each declared source holds (``course.lessons``' record), reads a batch through the
lesson's own code (its notebook's functions, ``lesson_code.from_notebook``, and the ``helpers`` it imports), loads
the model and processor where it has one, and runs one forward pass on that batch. What a notebook runs on the
cluster (Ray Data's reads, a Ray Train worker's or a Serve replica's loads) runs on the cluster here too: Ray Data,
or a Ray task (:func:`on_worker`), in the job's runtime env (``course.cluster.init_ray``), so on the tests' cluster
it runs on the worker node that shares no files with the checkout. The answer is what was read, as numbers and
shapes (``facts``); the test holds them.

Run as ``python tests/support/lesson_reads.py``: it attaches to Ray (``$RAY_ADDRESS``, else a local runtime), then
reads one lesson's name per line on stdin and answers each with one JSON line on the file descriptor
``$LESSON_READS_FD`` (its first line says it is ready); whatever else it and Ray's workers print goes to its stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ANSWERS_FD_ENV = "LESSON_READS_FD"
BATCH = 4  # images per batch read and passed through the model

Facts = dict[str, Any]


def where() -> Facts:
    """Where this process runs: its Ray node, and whether it sees the checkout (the tests' worker node does not)."""
    import ray

    return {"node": ray.get_runtime_context().get_node_id(), "sees_checkout": (ROOT / "Makefile").exists()}


def on_worker(function: Callable[..., Facts], *args: Any) -> Facts:
    """``function(*args)`` as a Ray task of this job (a CPU, no retry), as a Ray Train worker or a replica runs its
    code: what it returns, and where it ran (:func:`where`)."""
    import ray

    def run(*args: Any) -> Facts:
        return function(*args) | {"where": where()}

    return ray.get(ray.remote(run).options(num_cpus=1, max_retries=0).remote(*args))


def shape(array: Any) -> list[int]:
    return [int(n) for n in array.shape]


def listing(sources: Any, names: tuple[str, ...]) -> Facts:
    """What each of the declared ``names`` of ``sources`` holds: a Hub repository's files, a folder's or a bucket's
    object count per part, a labels file's rows (written from imagenette's folders, as notebook 03 does)."""
    import pandas as pd
    import pyarrow.fs as pafs
    from huggingface_hub import list_repo_files

    from course.storage import filesystem
    from helpers.ingest import class_folders, ensure_labels

    def count(uri: str) -> int:
        fs, path = filesystem(uri)
        return sum(info.is_file for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)))

    listed: Facts = {}
    for name in names:
        uri = getattr(sources, name)
        if name == "beans":
            listed[name] = sorted(list_repo_files(uri, repo_type="dataset"))
        elif name == "model":
            listed[name] = sorted(list_repo_files(uri))
        elif name == "imagenette":
            listed[name] = {folder: count(folder) for split in ("train", "val") for folder in class_folders(uri, split)}
        elif name == "imagenette_labels":
            listed[name] = pd.read_csv(ensure_labels(sources))["label"].value_counts().to_dict()
        elif name == "cifar10":
            listed[name] = {split: count(f"{uri}/{split}") for split in ("train", "test")}
        else:
            raise ValueError(f"no listing for the source {name!r}: add one to {__file__}")
    return listed


# --- the pieces a lesson runs where its notebook runs them -----------------------------------------------------------


def beans_fine_tune_batch(sources: Any, transform: Callable | None = None, collate: Callable | None = None) -> Facts:
    """Notebook 02's ``train_func`` (and 02b's) up to the Trainer, or notebook 01's cells with its own ``transform``
    and ``collate``: beans from the Hub, the processor, the classifier with a new head, one forward pass on a batch."""
    import torch

    from helpers.beans import class_names_of, load_beans
    from helpers.features import collate as helpers_collate
    from helpers.features import make_transform
    from helpers.models import load_classifier, load_processor

    ds = load_beans(sources)
    class_names = class_names_of(ds)
    processor = load_processor(sources.model)
    model = load_classifier(sources.model, class_names)
    if transform is None:
        transform = make_transform(processor)
    else:
        transform.__globals__["processor"] = processor  # the notebook's cell reads it as a global
    prepared = ds.with_transform(transform)
    batch = (collate or helpers_collate)([prepared["train"][i] for i in range(BATCH)])
    with torch.no_grad():
        out = model(**batch)  # pixel_values and labels: the logits, and the loss the Trainer minimises
    return {
        "splits": {split: len(rows) for split, rows in ds.items()},
        "columns": sorted(ds["train"].column_names),
        "class_names": class_names,
        "pixel_values": shape(batch["pixel_values"]),
        "labels": batch["labels"].tolist(),
        "logits": shape(out.logits),
        "loss": float(out.loss),
    }


class Classifier:
    """Notebook 03's ``train_func``, as a Ray actor: the pretrained classifier with a new head, loaded on the worker
    while the data is read, then one forward pass on a featurized batch as its Trainer gets it from the shard."""

    def __init__(self, model_id: str, class_names: list[str]) -> None:
        from helpers.models import load_classifier

        self.model = load_classifier(model_id, class_names)

    def forward(self, pixels: Any, labels: Any) -> Facts:
        import torch

        with torch.no_grad():
            out = self.model(pixel_values=torch.as_tensor(pixels), labels=torch.as_tensor(labels))
        return {"logits": shape(out.logits), "loss": float(out.loss), "where": where()}


def cifar_loader_forward(loaders: Callable, loop_config: dict) -> Facts:
    """Notebook 04's ``train_func_per_worker`` up to training: its ``loaders`` from S3 on the worker, the ViT, one
    forward pass on the first batch."""
    import torch

    from helpers.vit import Architecture, VisionTransformer

    train_loader, valid_loader = loaders(
        loop_config["uri"], loop_config["batch_size_per_worker"], loop_config["train_size"], loop_config["valid_size"]
    )
    images, labels = next(iter(train_loader))
    model = VisionTransformer(Architecture(**loop_config["architecture"]))
    with torch.no_grad():
        logits = model(images)
    return {
        "train_rows": len(train_loader.dataset),
        "valid_rows": len(valid_loader.dataset),
        "images": shape(images),
        "pixel_range": [float(images.min()), float(images.max())],
        "labels": labels.tolist(),
        "logits": shape(logits),
    }


def debug_share_forward(small_cnn: Callable, uri: str, size: int) -> Facts:
    """Notebook 02c's training data and model, on a worker: the first ``size`` images of the train split from S3,
    normalised as its ``my_share`` does, and its ``small_cnn``'s forward pass on 8 of them."""
    import torch

    from helpers.cifar import load_split, normalize

    images, labels = load_split(uri, "train", size)
    pixels = torch.from_numpy(normalize(images[:8]))
    with torch.no_grad():
        logits = small_cnn()(pixels)
    return {"rows": len(labels), "images": shape(pixels), "labels": labels[:8].tolist(), "logits": shape(logits)}


def read_02c(sources: Any, budget: Any) -> Facts:
    """CIFAR-10's parquet on S3, read on a worker as notebook 02c's runs read it, with its small CNN's forward pass."""
    from lesson_code import from_notebook

    small_cnn = from_notebook("02c_debugging", "small_cnn")
    return {"worker": on_worker(debug_share_forward, small_cnn, sources.cifar10, budget.debug.train_size)}


def fsdp_share_forward(my_share: Callable, uri: str, size: int, architecture: dict) -> Facts:
    """Notebook 04b's training data and model, on a worker: rank 0's share of 2 of the train split's first ``size``
    images from S3 (its ``my_share``), and its ViT's forward pass on 8 of them."""
    import torch

    from helpers.vit import Architecture, VisionTransformer

    images, labels = my_share(uri, "train", size, 0, 2)
    with torch.no_grad():
        logits = VisionTransformer(Architecture(**architecture))(images[:8])
    return {"rows": len(labels), "images": shape(images[:8]), "labels": labels[:8].tolist(), "logits": shape(logits)}


def read_04b(sources: Any, budget: Any) -> Facts:
    """CIFAR-10's parquet on S3, read on a worker as notebook 04b's training function reads it, with its ViT."""
    from lesson_code import from_notebook

    my_share = from_notebook("04b_fsdp", "my_share")
    architecture = {
        "num_layers": budget.fsdp.num_layers,
        "num_heads": budget.fsdp.num_heads,
        "hidden_dim": budget.fsdp.hidden_dim,
        "mlp_dim": budget.fsdp.mlp_dim,
    }  # the notebook's ARCHITECTURE, from the same budget section
    worker = on_worker(fsdp_share_forward, my_share, sources.cifar10, budget.fsdp.train_size, architecture)
    return {"worker": worker}


def tune_trial_forward(train_and_valid: Callable, uri: str, architecture: dict, batch_size: int) -> Facts:
    """Notebook 07's ``train_trial`` up to training: its ``train_and_valid`` from S3 on the worker, the ViT, one
    forward pass on the first batch."""
    import torch
    from torch.utils.data import DataLoader

    from helpers.vit import Architecture, VisionTransformer

    train, valid = train_and_valid(uri)
    images, labels = next(iter(DataLoader(train, batch_size=batch_size, shuffle=True)))
    with torch.no_grad():
        logits = VisionTransformer(Architecture(**architecture))(images)
    return {
        "train_rows": len(train),
        "valid_rows": len(valid),
        "images": shape(images),
        "labels": labels.tolist(),
        "logits": shape(logits),
    }


def serve_replica_answer(folder: str, body: bytes) -> Facts:
    """Notebook 06's deployment: ``ImageClassifier`` loaded once from the fine-tuned model's folder, then a request's
    body read as an image and answered, as its ``Classifier`` does."""
    from course.serving import answer, read_image
    from helpers.features import pixel_values
    from helpers.inference import ImageClassifier

    classifier = ImageClassifier(folder)
    image = read_image(body)
    probabilities = classifier.probabilities(pixel_values(classifier.processor, [image]))
    return {
        "image": [image.mode, *image.size],
        "probabilities": shape(probabilities),
        "total": float(probabilities.sum()),
        "answer": answer(probabilities[0], classifier.class_names),
        "class_names": classifier.class_names,
    }


# --- each lesson ---------------------------------------------------------------------------------------------------


def read_01(sources: Any, budget: Any) -> Facts:
    """One process, no Ray: beans and the model from the Hub, the notebook's own transform and collate."""
    from lesson_code import from_notebook

    transform, collate = from_notebook("01_local_finetune", "transform", "collate")
    return beans_fine_tune_batch(sources, transform, collate)


def read_02(sources: Any, budget: Any) -> Facts:
    """What ``train_func`` reads on each Ray Train worker: beans and the model from the Hub, on the worker node."""
    return on_worker(beans_fine_tune_batch, sources)


def read_03(sources: Any, budget: Any) -> Facts:
    """imagenette's folders on S3 through Ray Data (the labels file written from the folders and read back, the
    images), the notebook's label join and colour filter, its ``Featurizer`` on an actor pool, then the classifier's
    forward pass on a featurized batch where ``train_func`` runs. (Its readability check reads every photo once more:
    `make test` runs notebook 03 whole on the real sources.)"""
    import ray
    import ray.data
    from lesson_code import from_notebook
    from ray.data.expressions import col

    from course.cluster import configure_ray_data
    from helpers.ingest import check_label_table, class_folders, ensure_labels

    configure_ray_data()
    add_labels, _, add_shapes, featurizer = from_notebook(
        "03_ray_data", "add_labels", "channels", "add_shapes", "Featurizer"
    )
    labels_file = ensure_labels(sources)
    label_table = check_label_table(ray.data.read_csv(labels_file).to_pandas(), source=labels_file)
    class_names = sorted(label_table["label"].unique())
    classifier = ray.remote(Classifier).options(num_cpus=1, max_restarts=0).remote(sources.model, class_names)
    images = ray.data.read_images(class_folders(sources.imagenette, "train"), include_paths=True)
    label_of = dict(zip(label_table["file_name"], label_table["label"], strict=True))
    labeled = images.map_batches(add_labels, fn_kwargs={"label_of": label_of})
    rgb = labeled.map_batches(add_shapes).filter(expr=col("channels") == 3).drop_columns(["shape", "ndim", "channels"])
    features = rgb.map_batches(
        featurizer,
        fn_constructor_kwargs={"model": sources.model, "class_names": class_names},
        compute=ray.data.ActorPoolStrategy(size=1),
        batch_size=budget.dogs.inference_batch_size,
    )
    batch = features.take_batch(BATCH)
    try:
        forward = ray.get(classifier.forward.remote(batch["pixel_values"], batch["labels"]))
    finally:
        ray.kill(classifier)
    return {
        "label_rows": label_table["label"].value_counts().to_dict(),
        "class_names": class_names,
        "pixel_values": shape(batch["pixel_values"]),
        "labels": batch["labels"].tolist(),
        "file_names": batch["file_name"].tolist(),
    } | forward


def read_04(sources: Any, budget: Any) -> Facts:
    """CIFAR-10's parquet on S3 three ways: the notebook's preview (8 images in this process), its ``loaders`` on a
    Ray Train worker with the ViT's forward pass, and Ray Data's read with its ``normalize_batch``."""
    from dataclasses import asdict

    import numpy as np
    import ray
    import ray.data
    from lesson_code import from_notebook

    from course.cluster import configure_ray_data
    from course.resources import plan_resources
    from helpers.cifar import load_split, normalize
    from helpers.train import per_worker
    from helpers.vit import architecture_named

    configure_ray_data()
    plan = plan_resources(ray.cluster_resources(), budget)
    images, label_ids = load_split(sources.cifar10, "train", limit=8)
    pixels = normalize(images)
    loaders, normalize_batch = from_notebook("04_cifar10_pytorch_to_ray", "loaders", "normalize_batch")
    loop_config = {
        "uri": sources.cifar10,
        "train_size": budget.cifar.train_size,
        "valid_size": budget.cifar.valid_size,
        "architecture": asdict(architecture_named(budget.cifar.architecture)),
        "batch_size_per_worker": per_worker(budget.cifar.batch_size, plan.num_workers),
    }
    on_the_worker = on_worker(cifar_loader_forward, loaders, loop_config)
    train_data = ray.data.read_parquet(f"{sources.cifar10}/train").limit(budget.cifar.train_size)
    ray_batch = train_data.map_batches(normalize_batch).take_batch(8)
    return {
        "preview": {"images": shape(images), "dtype": str(images.dtype), "labels": label_ids.tolist()},
        "normalised": {"shape": shape(pixels), "range": [float(pixels.min()), float(pixels.max())]},
        "ray_data": {
            "image": shape(ray_batch["image"]),
            "dtype": str(ray_batch["image"].dtype),
            "labels": np.asarray(ray_batch["label"]).tolist(),
        },
        "worker": on_the_worker,
    }


def read_05(sources: Any, budget: Any) -> Facts:
    """The playbook's dataset: CIFAR-10's parquet on S3 through Ray Data, its ``flat_pixels``, its split; the linear
    model's forward pass on a batch of the train split."""
    import ray.data
    import torch
    from lesson_code import from_notebook

    from course.cluster import configure_ray_data

    configure_ray_data(preserve_order=False)  # as the notebook's first cell
    flat_pixels = from_notebook("05_data_loading_playbook", "flat_pixels")
    cifar = ray.data.read_parquet(f"{sources.cifar10}/train").limit(budget.playbook.rows).map_batches(flat_pixels)
    train_data, valid_data = cifar.train_test_split(test_size=0.25, shuffle=True, seed=0)
    batch = train_data.take_batch(16)
    with torch.no_grad():
        logits = torch.nn.Linear(3 * 32 * 32, 10)(torch.as_tensor(batch["x"]))
    return {
        "train_rows": train_data.count(),
        "valid_rows": valid_data.count(),
        "x": shape(batch["x"]),
        "labels": batch["y"].tolist(),
        "logits": shape(logits),
    }


def read_06(sources: Any, budget: Any) -> Facts:
    """The held-out images as a client sends them (bytes from S3, their labels from the labels file), and one
    request's answer from the deployment's code: ``ImageClassifier`` on a fine-tuned model's folder in the storage
    (here the pretrained model with its new dogs-and-fish head, saved as notebook 03's checkpoint holds it)."""
    import shutil

    from course.serving import labelled_images
    from course.storage import storage_path
    from helpers.models import load_classifier, load_processor

    held_out = labelled_images(sources, "val")
    class_names = sorted(held_out["label"].unique())
    folder = Path(storage_path()) / "lesson-reads" / "06-model"
    shutil.rmtree(folder, ignore_errors=True)
    load_classifier(sources.model, class_names).save_pretrained(folder)
    load_processor(sources.model).save_pretrained(folder)
    try:
        replica = on_worker(serve_replica_answer, str(folder), held_out["body"].iloc[0])
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)
    sizes = held_out["body"].map(len)
    return {"held_out": held_out["label"].value_counts().to_dict(), "smallest_body": int(sizes.min())} | replica


def read_07(sources: Any, budget: Any) -> Facts:
    """The trials' data: the notebook's ``train_and_valid`` from S3 where a trial runs, the ViT's forward pass on a
    batch; and its test split, read here."""
    from dataclasses import asdict

    from lesson_code import from_notebook

    from helpers.cifar import load_split
    from helpers.vit import architecture_named

    train_and_valid = from_notebook("07_ray_tune", "train_and_valid")
    # the notebook's constants, which its function reads as globals
    train_and_valid.__globals__.update(TRAIN_SIZE=budget.tune.train_size, VALID_SIZE=budget.tune.valid_size)
    architecture = asdict(architecture_named(budget.cifar.architecture))
    trial = on_worker(tune_trial_forward, train_and_valid, sources.cifar10, architecture, max(budget.tune.batch_sizes))
    test_images, test_labels = load_split(sources.cifar10, "test", budget.tune.test_size)
    return {"test": {"images": shape(test_images), "labels": sorted(set(test_labels.tolist()))}} | trial


READERS: dict[str, Callable[[Any, Any], Facts]] = {
    "01_local_finetune": read_01,
    "02_ray_train_finetune": read_02,
    "02b_fault_tolerance": read_02,  # its train_func reads as 02's does
    "02c_debugging": read_02c,
    "03_ray_data": read_03,
    "04_cifar10_pytorch_to_ray": read_04,
    "04b_fsdp": read_04b,
    "05_data_loading_playbook": read_05,
    "06_ray_serve": read_06,
    "07_ray_tune": read_07,
}


def read(notebook: str) -> Facts:
    """The lesson's sources checked and listed (its record's), then its reader's facts."""
    import ray

    from course import lessons
    from course.budget import get_budget
    from course.resources import cluster_gpus

    lesson = lessons.lesson_named(notebook)
    budget = get_budget(cluster_gpus(ray.cluster_resources()))
    sources = lessons.require_sources(notebook, budget)  # what the notebook's first cells check
    listed = listing(sources, lesson.sources)
    if notebook not in READERS:
        raise KeyError(f"{notebook} declares the sources {lesson.sources} but {__file__} has no reader for it")
    return {"kind": sources.kind, "model": sources.model, "listed": listed} | READERS[notebook](sources, budget)


def main() -> None:
    answers = os.fdopen(int(os.environ[ANSWERS_FD_ENV]), "w")

    def say(answer: dict) -> None:
        answers.write(json.dumps(answer, default=str) + "\n")
        answers.flush()

    start = time.perf_counter()
    import datasets  # noqa: F401  (what every lesson imports: paid once here, not by the first lesson)
    import ray
    import torch  # noqa: F401
    import transformers  # noqa: F401

    from course.cluster import init_ray

    init_ray()
    say({"ready": True, "seconds": time.perf_counter() - start, "node": ray.get_runtime_context().get_node_id()})
    labels = None
    try:
        for line in sys.stdin:
            notebook = line.strip()
            if not notebook:
                continue
            start = time.perf_counter()
            try:
                if labels is None:  # the labels file notebook 03 writes: an earlier run's is not this content's
                    from course.sources import get_sources

                    labels = Path(get_sources("real").imagenette_labels)
                    labels.unlink(missing_ok=True)
                answer = {"lesson": notebook, "facts": read(notebook)}
            except Exception:
                answer = {"lesson": notebook, "error": traceback.format_exc()}
            say(answer | {"seconds": time.perf_counter() - start})
    finally:
        if labels is not None:
            labels.unlink(missing_ok=True)
        ray.shutdown()


if __name__ == "__main__":
    main()
