"""Build the offline course data and the stand-in ViT checkpoint: ``python -m course.build``.

Everything is drawn from fixed seeds, so a rebuild gives the same files. A folder that
already exists is kept (``--force`` rebuilds it). Run by ``make data``.

With ``COURSE_DATA_DIR`` set to storage every node of a cluster mounts, ``make data`` builds there, or publishes
(copies) what the checkout's ``data/`` already holds: every worker then reads the data sets from there.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, ViTConfig, ViTForImageClassification, ViTImageProcessorPil

from course import config, standins
from course.sources import STANDIN_BEANS, STANDIN_CIFAR10, STANDIN_IMAGENETTE, STANDIN_VIT
from helpers import catalog
from helpers.models import label_maps, predict

# The stand-in checkpoint's configuration: a Hugging Face ViT like google/vit-base-patch16-224-in21k, much smaller
# (about 0.55 M parameters; not the plain-PyTorch ViT of notebook 04, see helpers.vit).
STANDIN_VIT_CONFIG = dict(
    image_size=64, patch_size=8, hidden_size=128, num_hidden_layers=4,
    num_attention_heads=4, intermediate_size=256,
)  # fmt: skip


def pretrain(
    model: PreTrainedModel,
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


def standin_vit(class_names: Sequence[str]) -> ViTForImageClassification:
    """A randomly initialised tiny ViT classifier (the stand-in before pretraining)."""
    id2label, label2id = label_maps(class_names)
    config = ViTConfig(**STANDIN_VIT_CONFIG, num_labels=len(class_names), id2label=id2label, label2id=label2id)
    return ViTForImageClassification(config)


def standin_processor() -> ViTImageProcessorPil:
    """The image processor of the tiny ViT: resize to 64x64, scale to [0, 1], normalise to [-1, 1]."""
    size = STANDIN_VIT_CONFIG["image_size"]
    return ViTImageProcessorPil(size={"height": size, "width": size}, image_mean=[0.5] * 3, image_std=[0.5] * 3)


def build_beans(root: Path) -> None:
    """The beans-like leaves in the imagefolder layout: ``root/<split>/<class>/<file>.png``."""
    for split, n in catalog.BEANS_SPLITS.items():
        for i in tqdm(range(n), desc=f"{root.name}/{split}"):
            label = i % len(catalog.BEANS_CLASSES)
            folder = root / split / catalog.BEANS_CLASSES[label]
            folder.mkdir(parents=True, exist_ok=True)
            standins.leaf_image(label, standins.rng_for("beans", split, i)).save(folder / f"{split}_{i:04d}.png")


def grayscale_indices(split: str, synset: str, n: int) -> set[int]:
    """Which of the ``n`` images of a class are saved in grayscale (a fixed few percent)."""
    rng = standins.rng_for("imagenette-gray", f"{split}/{synset}", 0)
    return set(rng.choice(n, size=round(n * standins.GRAYSCALE_SHARE), replace=False).tolist())


def build_imagenette(root: Path) -> None:
    """Dogs and fish in imagenette's layout (``root/<split>/<synset>/*.JPEG``) plus ``labels.csv``."""
    rows = []
    for split, n in standins.IMAGENETTE_SPLITS.items():
        for synset, kind in catalog.IMAGENETTE_SYNSETS.items():
            folder = root / split / synset
            folder.mkdir(parents=True, exist_ok=True)
            gray = grayscale_indices(split, synset, n)
            for i in tqdm(range(n), desc=f"{root.name}/{split}/{synset}"):
                img = standins.animal_image(kind, standins.rng_for("imagenette", f"{split}/{synset}", i))
                name = f"{synset}_{split}_{i:05d}.JPEG"
                (img.convert("L") if i in gray else img).save(folder / name, quality=92)
                rows.append((name, kind))
    with open(root / "labels.csv", "w", newline="") as f:
        csv.writer(f).writerows([("file_name", "label"), *rows])


def shapes_arrays(split: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` CIFAR-10-like images (uint8, N x 32 x 32 x 3) and their labels, balanced."""
    labels = np.arange(n) % len(catalog.CIFAR10_CLASSES)
    images = np.stack(
        [standins.shape_image(int(y), standins.rng_for("cifar10", split, i)) for i, y in enumerate(labels)]
    )
    return images, labels


CIFAR10_PART_ROWS = 1000  # rows per parquet file: a read that needs 4,000 rows opens 4 files, not the whole split


def build_cifar10(root: Path) -> None:
    """CIFAR-10-like parquet files ``root/<split>/part-NNNNN.parquet`` with ``image`` and ``label`` columns.

    Split in parts like the real data set's bucket: Ray Data reads the parts in parallel and stops at a
    ``limit`` (notebook 04's stream reads only the images it trains on, every epoch)."""
    from ray.data.extensions import ArrowTensorArray  # the tensor column type Ray Data reads back

    for split, n in standins.CIFAR10_SPLITS.items():
        images, labels = shapes_arrays(split, n)  # balanced in every part: label = row number mod 10
        (root / split).mkdir(parents=True, exist_ok=True)
        table = pa.table({"image": ArrowTensorArray.from_numpy(images), "label": pa.array(labels, pa.int64())})
        for part, start in enumerate(range(0, n, CIFAR10_PART_ROWS)):
            pq.write_table(table.slice(start, CIFAR10_PART_ROWS), root / split / f"part-{part:05d}.parquet")


def build_vit(root: Path, epochs: int = 3) -> None:
    """Pretrain the tiny ViT on the CIFAR-10-like shapes (not on any fine-tuning task) and save it."""
    torch.manual_seed(0)
    processor = standin_processor()
    model = standin_vit(catalog.CIFAR10_CLASSES)
    x_train, y_train = shapes_arrays("train", standins.CIFAR10_SPLITS["train"])
    x_test, y_test = shapes_arrays("test", standins.CIFAR10_SPLITS["test"])
    pixels = processor(list(x_train), return_tensors="pt")["pixel_values"]
    losses = pretrain(model, pixels, torch.as_tensor(y_train), epochs=epochs)
    accuracy = float((predict(model, processor(list(x_test), return_tensors="pt")["pixel_values"]) == y_test).mean())
    print(f"pretraining losses per epoch: {[round(v, 3) for v in losses]}; test accuracy {accuracy:.3f}")
    model.save_pretrained(root)
    processor.save_pretrained(root)
    (root / "README.md").write_text(
        "A tiny ViT (0.6 M parameters) pretrained by `python -m course.build` on the synthetic\n"
        f"CIFAR-10-like shapes for {epochs} epochs (test accuracy {accuracy:.3f}). It stands in for\n"
        "google/vit-base-patch16-224-in21k so that the course runs offline on a CPU.\n"
    )


BUILDERS: dict[str, Callable[[Path], None]] = {
    STANDIN_BEANS: build_beans,
    STANDIN_IMAGENETTE: build_imagenette,
    STANDIN_CIFAR10: build_cifar10,
    STANDIN_VIT: build_vit,
}


LOCAL_DATA_DIR = config.HOME / "data"  # where `make data` builds when COURSE_DATA_DIR is not set
# The stand-in that each field of course.sources.Sources names, with COURSE_SOURCES=standin
FOR_SOURCE = {
    "beans": STANDIN_BEANS,
    "model": STANDIN_VIT,
    "imagenette": STANDIN_IMAGENETTE,
    "imagenette_labels": STANDIN_IMAGENETTE,
    "cifar10": STANDIN_CIFAR10,
}


def build(name: str, data_dir: Path, force: bool = False, built_here: Path = LOCAL_DATA_DIR) -> Path:
    """Build one stand-in into ``data_dir/name`` unless it is there; write to a temporary folder first. When
    ``data_dir`` is elsewhere (shared storage) and ``built_here`` already holds it, copy it instead (publish)."""
    target = data_dir / name
    if target.exists() and not force:
        print(f"kept     {target}")
        return target
    start = time.perf_counter()
    partial = data_dir / f".{name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    source = built_here / name
    if source.is_dir() and source.resolve() != target.resolve():
        shutil.copytree(source, partial)
        partial.rename(target)
        print(f"published {source} to {target} in {time.perf_counter() - start:.0f} s")
        return target
    partial.mkdir(parents=True)
    BUILDERS[name](partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    print(f"built    {target} in {time.perf_counter() - start:.0f} s")
    return target


def build_for(sources: tuple[str, ...], data_dir: Path) -> None:
    """Build the stand-ins that ``sources`` (fields of Sources, as a lesson's record lists them) need, each
    unless it is there: a lesson opened on its own builds what it reads, in a minute or so."""
    for name in dict.fromkeys(FOR_SOURCE[source] for source in sources):
        build(name, data_dir)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", default=list(BUILDERS), help=f"what to build (default: all of {list(BUILDERS)})"
    )
    parser.add_argument("--force", action="store_true", help="rebuild what already exists")
    parser.add_argument("--data-dir", type=Path, default=config.DATA_DIR, help="default: COURSE_DATA_DIR, or data/")
    args = parser.parse_args(argv)
    for name in args.names:
        if name not in BUILDERS:
            parser.error(f"unknown name {name!r}: choose from {list(BUILDERS)}")
        build(name, args.data_dir, args.force)


if __name__ == "__main__":
    main()
