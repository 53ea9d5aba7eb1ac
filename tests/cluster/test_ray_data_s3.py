"""Notebook 03's read path on Ray: mixed grayscale blocks, the label join, and the same data from S3.

The S3 part is real: a moto S3 server on loopback holds a copy of the dogs-vs-fish folder, and
Ray Data reads ``s3://...`` with the endpoint from the standard ``AWS_*`` environment variables.
"""

import dataclasses
import hashlib
from collections.abc import Iterator

import boto3
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
import ray.data
from lesson_code import from_notebook
from local_s3 import local_s3
from PIL import Image
from ray.data.expressions import col

from course import config
from course.cluster import configure_ray_data, init_ray
from course.sources import STANDIN_CIFAR10, STANDIN_IMAGENETTE, get_sources, require_data
from helpers.cifar import load_split
from helpers.ingest import (
    add_shapes,
    check_label_table,
    check_labels,
    class_folders,
    ensure_labels,
    require_readable_images,
)

STANDIN = config.DATA_DIR / STANDIN_IMAGENETTE
STANDIN_CIFAR10 = config.DATA_DIR / STANDIN_CIFAR10
BUCKET = "course-data"
# The real sources' buckets and prefixes (course.config), and a synset imagenette has but the course skips.
REAL_IMAGENETTE = ("air-example-data-2", "imagenette2")
REAL_CIFAR10 = ("ray-example-data", "cifar10-parquet")
SKIPPED_SYNSET = "n03000684"

pytestmark = pytest.mark.cluster  # starts Ray


@pytest.fixture(scope="module")
def s3_env() -> Iterator[dict[str, str]]:
    """A loopback S3 server holding the stand-in folder; yields the AWS_* variables that reach it."""
    with local_s3() as env:
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        for path in STANDIN.rglob("*"):
            if path.is_file():
                s3.upload_file(str(path), BUCKET, f"{STANDIN.name}/{path.relative_to(STANDIN)}")
        yield env


@pytest.fixture(scope="module")
def ray_with_s3(s3_env: dict[str, str]) -> Iterator[None]:
    """Ray (the test cluster, or a local runtime) whose workers see the S3 endpoint variables."""
    ray.shutdown()
    init_ray(runtime_env={"env_vars": s3_env})
    configure_ray_data()
    yield
    ray.shutdown()


def read_labels(uri: str) -> pd.DataFrame:
    """Notebook 03's read of the labels file."""
    return check_label_table(ray.data.read_csv(uri).to_pandas(), source=uri)


def read_labelled(root: str, labels_uri: str) -> ray.data.Dataset:
    """The read path of notebook 03, with its own ``add_labels``: images with their paths, labels by file name."""
    add_labels = from_notebook("03_ray_data", "add_labels")
    label_table = read_labels(labels_uri)
    label_of = dict(zip(label_table["file_name"], label_table["label"], strict=True))
    images = ray.data.read_images(class_folders(root, "train"), include_paths=True)
    return images.map_batches(add_labels, fn_kwargs={"label_of": label_of})


def as_table(ds: ray.data.Dataset) -> pd.DataFrame:
    """File name, label and a digest of the pixels of every image (grayscale may be (H, W) or (1, H, W))."""
    rows = ds.to_pandas()
    rows["digest"] = [hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest() for image in rows["image"]]
    return rows[["file_name", "label", "digest"]].sort_values("file_name").reset_index(drop=True)


@pytest.mark.usefixtures("ray_with_s3")
def test_every_image_gets_the_label_of_its_folder():
    table = as_table(read_labelled(str(STANDIN), str(STANDIN / "labels.csv")))
    assert len(table) == table["file_name"].nunique() == 600
    check_labels(table)
    expected = table["file_name"].str.startswith("n02102040").map({True: "dog", False: "fish"})
    assert (table["label"] == expected).all()


@pytest.mark.usefixtures("ray_with_s3")
def test_channel_counts_find_every_grayscale_file_in_mixed_blocks():
    on_disk = sum(Image.open(path).mode == "L" for path in STANDIN.glob("train/*/*.JPEG"))
    ds = ray.data.read_images(f"{STANDIN}/train", include_paths=True)
    counts = ds.map_batches(add_shapes).select_columns(["channels"]).to_pandas()["channels"].value_counts()
    assert on_disk > 0 and counts[1] == on_disk
    assert ds.map_batches(add_shapes).filter(expr=col("channels") == 3).count() == 600 - on_disk  # notebook 03's filter


@pytest.mark.usefixtures("ray_with_s3")
def test_s3_gives_the_same_images_and_labels_as_the_local_folder():
    root = f"s3://{BUCKET}/{STANDIN.name}"
    from_s3 = as_table(read_labelled(root, f"{root}/labels.csv"))
    local = as_table(read_labelled(str(STANDIN), str(STANDIN / "labels.csv")))
    assert len(from_s3) == 600
    pd.testing.assert_frame_equal(from_s3, local)


@pytest.mark.usefixtures("s3_env")
def test_a_wrong_bucket_or_prefix_names_the_uri_and_the_setting(tmp_path):
    real = get_sources("real", tmp_path)
    good = dataclasses.replace(
        real, imagenette=f"s3://{BUCKET}/{STANDIN.name}", cifar10=f"s3://{BUCKET}/{STANDIN.name}"
    )
    assert require_data(good) is good
    for wrong in (f"s3://no-such-bucket/{STANDIN.name}", f"s3://{BUCKET}/no-such-prefix"):
        with pytest.raises(FileNotFoundError, match=r"COURSE_SOURCES") as error:
            require_data(dataclasses.replace(good, imagenette=wrong))
        assert wrong in str(error.value) and "`imagenette`" in str(error.value)


@pytest.mark.usefixtures("ray_with_s3")
def test_a_truncated_image_is_named_with_the_reason(tmp_path):
    good = sorted(STANDIN.glob("train/*/*.JPEG"))[:6]
    for path in good:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    assert require_readable_images(str(tmp_path)) == 6
    (tmp_path / "broken.JPEG").write_bytes(good[0].read_bytes()[:600])  # a download cut short
    with pytest.raises(ValueError, match=r"1 of 7 files .* not readable images: broken\.JPEG \(OSError"):
        require_readable_images(str(tmp_path))


PUBLIC = "public-read"  # the canned ACL: anyone may list the bucket and read its objects without credentials


@pytest.fixture(scope="module")
def real_layouts(s3_env: dict[str, str]) -> None:
    """The real sources' buckets on the local server, in their layouts, holding the stand-ins' small contents.

    imagenette2: ``<split>/<synset>/<file>.JPEG`` for every synset, no labels file. cifar10-parquet:
    ``<split>/`` holding several parquet files, each with an ``image`` tensor column and a ``label`` column.
    """
    s3 = boto3.client("s3")
    bucket, prefix = REAL_IMAGENETTE
    s3.create_bucket(Bucket=bucket, ACL=PUBLIC)  # public, as the real sources' buckets are
    for path in STANDIN.glob("*/*/*.JPEG"):
        s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(STANDIN)}", ExtraArgs={"ACL": PUBLIC})
    for split in ("train", "val"):  # a class of imagenette the course does not use: it must stay out
        for path in sorted(STANDIN.glob(f"{split}/*/*.JPEG"))[:2]:
            key = f"{prefix}/{split}/{SKIPPED_SYNSET}/{SKIPPED_SYNSET}_{path.name}"
            s3.upload_file(str(path), bucket, key, ExtraArgs={"ACL": PUBLIC})
    bucket, prefix = REAL_CIFAR10
    s3.create_bucket(Bucket=bucket, ACL=PUBLIC)
    for split in ("train", "test"):
        table = pq.read_table(STANDIN_CIFAR10 / split)  # its parts, in order
        half = len(table) // 2
        for part, rows in enumerate((table.slice(0, half), table.slice(half))):
            out = pa.BufferOutputStream()
            pq.write_table(rows, out)
            s3.put_object(
                Bucket=bucket, Key=f"{prefix}/{split}/part-{part:05d}.parquet", Body=out.getvalue().to_pybytes()
            )


@pytest.mark.usefixtures("ray_with_s3", "real_layouts")
def test_the_real_sources_on_s3_work_unchanged(tmp_path):
    """COURSE_SOURCES=real, buckets and all, but the Hub: the labels file is written, 03 and 04 read as they do."""
    sources = get_sources("real", tmp_path)
    assert require_data(sources) is sources
    labels = ensure_labels(sources)  # imagenette ships no labels file: written from the synset folders
    assert labels == str(tmp_path / "imagenette2-labels.csv")
    written = read_labels(labels)
    assert sorted(written["file_name"]) == sorted(pd.read_csv(STANDIN / "labels.csv")["file_name"])
    assert require_readable_images(class_folders(sources.imagenette, "train")) == 600  # not the skipped class
    table = as_table(read_labelled(sources.imagenette, labels))  # notebook 03's read and label join
    local = as_table(read_labelled(str(STANDIN), str(STANDIN / "labels.csv")))
    pd.testing.assert_frame_equal(table, local)
    images, label_ids = load_split(sources.cifar10, "train")  # notebook 04's read, both ways
    local_images, local_ids = load_split(str(STANDIN_CIFAR10), "train")
    assert np.array_equal(images, local_images) and np.array_equal(label_ids, local_ids)
    assert ray.data.read_parquet(f"{sources.cifar10}/test").count() == len(load_split(str(STANDIN_CIFAR10), "test")[1])
