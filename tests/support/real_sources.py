"""Stand-ins of the real sources on 127.0.0.1, for the rehearsal of ``COURSE_SOURCES=real`` (real_sources_rehearsal.py).

What a user's run reads, laid out as the real services hold it, with small, drawn content:

* a Hub (:mod:`standin_hub`, reached through ``HF_ENDPOINT``) with
  - ``AI-Lab-Makerere/beans``: the dataset card (its ``configs`` and features), parquet files under ``data/`` with
    the real columns (``image_file_path``, ``image`` as 500x500 JPEG, ``labels``) and split sizes (1034/133/128), and
    the older zip files beside them, outside the card's pattern; the old id ``beans`` redirects to it;
  - the cpu budget's model and the gpu budget's model (:data:`course.sources.REAL_MODELS`): their real
    ``config.json`` and ``preprocessor_config.json`` (written from the published files), and random weights of the
    real shapes for the cpu model (the gpu model's 346 MB are left out: the rehearsal runs the cpu budget);
* S3 (moto) with the real buckets in their real region (us-west-2): ``air-example-data-2/imagenette2/{train,val}/
  <synset>/*.JPEG`` (photos of various sizes, some grayscale, a third synset the course does not read) and
  ``ray-example-data/cifar10-parquet/{train,test}/`` (Ray's tensor column, 50,000 and 10,000 rows).

The content is drawn (the course's synthetic generator) and the weights are random: the lessons run end to end at
real sizes, but their accuracy says nothing about the real data (the rehearsal reports it without a floor).
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from local_s3 import local_s3
from PIL import Image
from standin_hub import StandinHub, standin_hub

from course import config, standins
from course.sources import REAL_MODELS, STANDIN_CIFAR10
from helpers import catalog

BEANS_ID = "AI-Lab-Makerere/beans"
BEANS_OLD_ID = "beans"
BEANS_SIZE = 500  # pixels, both sides: the real photos' size
REGION = "us-west-2"  # both public buckets
EXTRA_SYNSET = "n03000684"  # a synset of imagenette the course does not read (chain saw)
IMAGENETTE_SIZES = [(500, 375), (375, 500), (500, 333), (640, 480), (1024, 768), (400, 400)]  # photos, width x height
IMAGENETTE_SPLITS = {"train": {"n02102040": 955, "n01440764": 963}, "val": {"n02102040": 395, "n01440764": 387}}
# At the smoke size (COURSE_SMOKE=1) the rehearsal serves fewer photos, at the same sizes and through the same layout:
# every code path, not the real counts (notebook 03 reads every photo of its folders, whatever the budget), and fewer
# CIFAR-10 rows than the smoke budget's lessons could ask for.
SMOKE_BEANS_SPLITS = {"train": 96, "validation": 32, "test": 32}
SMOKE_IMAGENETTE_SPLITS = {"train": {"n02102040": 48, "n01440764": 48}, "val": {"n02102040": 24, "n01440764": 24}}
SMOKE_CIFAR_SPLITS = {"train": 5_000, "test": 1_000}
CIFAR_SPLITS = {"train": 50_000, "test": 10_000}
CONTENT_VERSION = "2"  # bump when what is built changes: a cached copy of another version is built again

BEANS_CARD = """---
license: mit
task_categories:
- image-classification
pretty_name: Beans
dataset_info:
  features:
  - name: image_file_path
    dtype: string
  - name: image
    dtype: image
  - name: labels
    dtype:
      class_label:
        names:
          '0': angular_leaf_spot
          '1': bean_rust
          '2': healthy
  splits:
{splits}
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
  - split: validation
    path: data/validation-*
  - split: test
    path: data/test-*
---

# Beans (stand-in)

Drawn leaves in the layout of the Hub's beans: the course's rehearsal of its real sources.
"""

# google/vit-base-patch16-224-in21k: the gpu budget's model (a backbone without a classification head)
VIT_BASE_CONFIG = {
    "_name_or_path": "google/vit-base-patch16-224-in21k",
    "architectures": ["ViTModel"],
    "attention_probs_dropout_prob": 0.0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "hidden_size": 768,
    "image_size": 224,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-12,
    "model_type": "vit",
    "num_attention_heads": 12,
    "num_channels": 3,
    "num_hidden_layers": 12,
    "patch_size": 16,
    "qkv_bias": True,
    "transformers_version": "4.13.0.dev0",
}
VIT_BASE_PROCESSOR = {
    "do_normalize": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 2,
    "size": 224,
}
# facebook/deit-tiny-patch16-224: the cpu budget's model, an ImageNet-1k classifier (1000 labels; the stand-in
# names them LABEL_<i>, the real file names the ImageNet classes)
DEIT_TINY_CONFIG = {
    "architectures": ["ViTForImageClassification"],
    "attention_probs_dropout_prob": 0.0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,
    "hidden_size": 192,
    "id2label": {str(i): f"LABEL_{i}" for i in range(1000)},
    "image_size": 224,
    "initializer_range": 0.02,
    "intermediate_size": 768,
    "label2id": {f"LABEL_{i}": i for i in range(1000)},
    "layer_norm_eps": 1e-12,
    "model_type": "vit",
    "num_attention_heads": 3,
    "num_channels": 3,
    "num_hidden_layers": 12,
    "patch_size": 16,
    "qkv_bias": True,
    "transformers_version": "4.6.0.dev0",
}
DEIT_TINY_PROCESSOR = {
    "crop_size": 224,
    "do_center_crop": True,
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "DeiTFeatureExtractor",
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "resample": 3,
    "size": 256,
}
MODELS = {
    REAL_MODELS["gpu"]: (VIT_BASE_CONFIG, VIT_BASE_PROCESSOR, False),
    REAL_MODELS["cpu"]: (DEIT_TINY_CONFIG, DEIT_TINY_PROCESSOR, True),
}


def _jpeg(image: Image.Image, quality: int = 90) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def build_beans(repo: Path, sizes: dict[str, int] = catalog.BEANS_SPLITS) -> None:
    """The beans repository: card, ``data/<split>-00000-of-00001.parquet`` and the older zip files (``sizes``: rows
    per split, beans' own by default)."""
    import datasets

    features = datasets.Features(
        {
            "image_file_path": datasets.Value("string"),
            "image": datasets.Image(),
            "labels": datasets.ClassLabel(names=catalog.BEANS_CLASSES),
        }
    )
    (repo / "data").mkdir(parents=True, exist_ok=True)
    splits = []
    for split, n in sizes.items():
        rows = {"image_file_path": [], "image": [], "labels": []}
        for i in range(n):
            label = i % len(catalog.BEANS_CLASSES)
            leaf = standins.leaf_image(label, standins.rng_for("beans-real", split, i))
            name = f"/home/datasets/beans/{split}/{catalog.BEANS_CLASSES[label]}/{split}.{i}.jpg"
            image = leaf.resize((BEANS_SIZE, BEANS_SIZE), Image.Resampling.BICUBIC)
            rows["image_file_path"].append(name)
            rows["image"].append({"bytes": _jpeg(image), "path": None})
            rows["labels"].append(label)
        written = datasets.Dataset.from_dict(rows, features=features)
        written.to_parquet(repo / "data" / f"{split}-00000-of-00001.parquet")
        splits.append(f"  - name: {split}\n    num_bytes: {written.data.nbytes}\n    num_examples: {n}")
        with zipfile.ZipFile(repo / "data" / f"{split}.zip", "w") as archive:  # the old layout, outside the pattern
            archive.writestr(f"{split}/README.txt", "the older zip layout of beans; the card's data_files skip it")
    (repo / "README.md").write_text(BEANS_CARD.replace("{splits}", "\n".join(splits)))


def build_model(repo: Path, model_config: dict, processor: dict, weights: bool) -> None:
    """A model repository: its ``config.json`` and ``preprocessor_config.json``, and random weights if asked."""
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "config.json").write_text(json.dumps(model_config, indent=2))
    (repo / "preprocessor_config.json").write_text(json.dumps(processor, indent=2))
    if weights:
        import torch
        from transformers import AutoConfig, AutoModel, AutoModelForImageClassification

        torch.manual_seed(0)
        built = AutoConfig.from_pretrained(repo)
        auto = (
            AutoModelForImageClassification
            if "ForImageClassification" in model_config["architectures"][0]
            else AutoModel
        )
        auto.from_config(built).save_pretrained(repo / ".weights")
        shutil.move(repo / ".weights" / "model.safetensors", repo / "model.safetensors")
        shutil.rmtree(repo / ".weights")


def build_hub(root: Path, smoke: bool = False) -> None:
    """The Hub's repositories under ``root`` (``datasets/<id>``, ``models/<id>``); fewer beans at the smoke size."""
    build_beans(root / "datasets" / BEANS_ID, SMOKE_BEANS_SPLITS if smoke else catalog.BEANS_SPLITS)
    for model_id, (model_config, processor, weights) in MODELS.items():
        build_model(root / "models" / model_id, model_config, processor, weights)


def imagenette_objects(smoke: bool = False) -> Iterator[tuple[str, bytes]]:
    """``(key, JPEG bytes)`` of the imagenette2 prefix: the course's two synsets at imagenette's sizes, and a third;
    as many photos as imagenette has, or :data:`SMOKE_IMAGENETTE_SPLITS`."""
    counted = SMOKE_IMAGENETTE_SPLITS if smoke else IMAGENETTE_SPLITS
    splits = {split: {**counts, EXTRA_SYNSET: 5} for split, counts in counted.items()}
    for split, counts in splits.items():
        for synset, n in counts.items():
            kind = catalog.IMAGENETTE_SYNSETS.get(synset, "dog")
            for i in range(n):
                rng = standins.rng_for("imagenette-real", f"{split}/{synset}", i)
                image = standins.animal_image(kind, rng).resize(IMAGENETTE_SIZES[i % len(IMAGENETTE_SIZES)])
                if i % 25 == 7:  # a few grayscale photos, as imagenette has
                    image = image.convert("L")
                # imagenette's names: <synset>_<n>.JPEG in train/, ImageNet's ILSVRC2012_val_<n>.JPEG in val/ (unique
                # across splits: notebook 03 joins the labels by file name)
                name = f"{synset}_{i:05d}" if split == "train" else f"ILSVRC2012_val_{synset[1:]}{i:04d}"
                yield f"imagenette2/{split}/{synset}/{name}.JPEG", _jpeg(image, 85)


def cifar_objects(standin: Path, smoke: bool = False) -> Iterator[tuple[str, bytes]]:
    """``(key, parquet bytes)`` of cifar10-parquet: the stand-in's rows repeated to CIFAR-10's split sizes (or
    :data:`SMOKE_CIFAR_SPLITS`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for split, n in (SMOKE_CIFAR_SPLITS if smoke else CIFAR_SPLITS).items():
        table = pq.read_table(standin / split)
        repeated = [table] * -(-n // table.num_rows)
        full = pa.concat_tables(repeated).slice(0, n)
        for part, start in enumerate(range(0, n, 10_000)):
            buffer = io.BytesIO()
            pq.write_table(full.slice(start, 10_000), buffer)
            yield f"cifar10-parquet/{split}/part-{part:05d}.parquet", buffer.getvalue()


def build_s3(root: Path, cifar_standin: Path, smoke: bool = False) -> None:
    """The buckets' objects under ``root/<bucket>/<key>``, uploaded to the S3 stand-in by :func:`real_services`."""
    for bucket, objects in (
        ("air-example-data-2", imagenette_objects(smoke)),
        ("ray-example-data", cifar_objects(cifar_standin, smoke)),
    ):
        for key, data in objects:
            path = root / bucket / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def build_content(root: Path, smoke: bool = False) -> Path:
    """The Hub's and the buckets' content, in ``root`` (kept: built again only when :data:`CONTENT_VERSION` moves);
    ``smoke``: with fewer photos (:data:`SMOKE_BEANS_SPLITS`, :data:`SMOKE_IMAGENETTE_SPLITS`)."""
    stamp, version = root / "VERSION", CONTENT_VERSION + (" smoke" if smoke else "")
    if stamp.exists() and stamp.read_text() == version:
        return root
    shutil.rmtree(root, ignore_errors=True)
    build_hub(root / "hub", smoke)
    build_s3(root / "s3", config.DATA_DIR / STANDIN_CIFAR10, smoke)
    stamp.write_text(version)
    return root


@contextmanager
def real_services(content: Path) -> Iterator[tuple[dict[str, str], StandinHub]]:
    """The Hub and S3 stand-ins, serving ``content``; yields the variables that send a user's run to them (the
    endpoints only: no AWS region or keys, as on a machine without AWS settings) and the Hub, for its request log."""
    import boto3

    with local_s3() as s3_env, standin_hub(content / "hub", {BEANS_OLD_ID: BEANS_ID}) as hub:
        client = boto3.client("s3", endpoint_url=s3_env["AWS_ENDPOINT_URL"], region_name=REGION)
        for bucket in sorted(p for p in (content / "s3").iterdir() if p.is_dir()):
            where = {"LocationConstraint": REGION}  # public, as the real buckets: anyone may read, unsigned
            client.create_bucket(Bucket=bucket.name, CreateBucketConfiguration=where, ACL="public-read")
            for path in sorted(p for p in bucket.rglob("*") if p.is_file()):
                key, public = path.relative_to(bucket).as_posix(), {"ACL": "public-read"}
                client.upload_file(str(path), bucket.name, key, ExtraArgs=public)
        yield {"AWS_ENDPOINT_URL": s3_env["AWS_ENDPOINT_URL"], "HF_ENDPOINT": hub.endpoint}, hub
