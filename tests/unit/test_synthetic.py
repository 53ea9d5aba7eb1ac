import csv

import numpy as np
import pytest
from PIL import Image

from course import build, config, standins
from course.sources import STANDIN_BEANS, STANDIN_CIFAR10, STANDIN_IMAGENETTE, require_local
from helpers import catalog


def test_images_depend_only_on_seed_split_and_index():
    a = standins.leaf_image(1, standins.rng_for("beans", "train", 7))
    b = standins.leaf_image(1, standins.rng_for("beans", "train", 7))
    c = standins.leaf_image(1, standins.rng_for("beans", "train", 8))
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(c))
    x1, y1 = build.shapes_arrays("test", 20)
    x2, y2 = build.shapes_arrays("test", 20)
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)


def test_shapes_are_cifar_sized_and_balanced():
    images, labels = build.shapes_arrays("train", 50)
    assert images.shape == (50, 32, 32, 3) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [5] * 10


def test_classes_differ_on_average():
    """Each beans-like class must carry a signal: its mean image differs from the others'."""
    means = [
        np.mean([np.asarray(standins.leaf_image(k, standins.rng_for("t", "x", i)), float) for i in range(30)], axis=0)
        for k in range(3)
    ]
    red_minus_green = [float((m[..., 0] - m[..., 1]).mean()) for m in means]
    assert red_minus_green[1] > red_minus_green[2]  # rust pustules are orange, healthy leaves are not


def test_imagenette_build_has_layout_labels_and_grayscale_share(tmp_path):
    build.build_imagenette(tmp_path)
    rows = list(csv.DictReader(open(tmp_path / "labels.csv")))
    files = sorted(tmp_path.glob("*/*/*.JPEG"))
    assert len(rows) == len(files) == 2 * sum(standins.IMAGENETTE_SPLITS.values())
    assert {r["file_name"] for r in rows} == {f.name for f in files}
    for split, n in standins.IMAGENETTE_SPLITS.items():
        for synset, kind in catalog.IMAGENETTE_SYNSETS.items():
            folder = sorted((tmp_path / split / synset).glob("*.JPEG"))
            assert len(folder) == n
            gray = sum(Image.open(f).mode == "L" for f in folder)
            assert gray == round(n * standins.GRAYSCALE_SHARE) > 0
            assert {r["label"] for r in rows if r["file_name"] in {f.name for f in folder}} == {kind}


@pytest.mark.parametrize("name", [STANDIN_BEANS, STANDIN_IMAGENETTE, STANDIN_CIFAR10])
def test_rebuild_is_identical(tmp_path, name):
    """`make data` twice gives the same bytes (compared on a sample of files)."""
    if name == STANDIN_BEANS:  # the full build takes seconds; compare a few images instead
        split, i = "validation", 5
        first = standins.leaf_image(i % 3, standins.rng_for("beans", split, i))
        built = require_local(config.DATA_DIR / name, "beans") / split / catalog.BEANS_CLASSES[i % 3]
        assert np.array_equal(np.asarray(Image.open(built / f"{split}_{i:04d}.png")), np.asarray(first))
        return
    build.build(name, tmp_path)
    reference = require_local(config.DATA_DIR / name, name)
    for path in sorted(p for p in (tmp_path / name).rglob("*") if p.is_file())[:40]:
        assert path.read_bytes() == (reference / path.relative_to(tmp_path / name)).read_bytes(), path


def test_built_beans_has_the_promised_splits_and_classes():
    root = require_local(config.DATA_DIR / STANDIN_BEANS, "beans")
    for split, n in catalog.BEANS_SPLITS.items():
        assert sorted(p.name for p in (root / split).iterdir()) == catalog.BEANS_CLASSES
        assert len(list((root / split).glob("*/*.png"))) == n


def test_built_cifar10_parquet_has_image_and_label_columns():
    import pyarrow.parquet as pq

    root = require_local(config.DATA_DIR / STANDIN_CIFAR10, "cifar10")
    for split, n in standins.CIFAR10_SPLITS.items():
        table = pq.read_table(root / split)
        assert table.column_names == ["image", "label"] and table.num_rows == n
        parts = sorted((root / split).glob("*.parquet"))
        assert len(parts) == n // build.CIFAR10_PART_ROWS, "in parts, so that a read can stop at a limit"
        assert sorted(set(table.column("label").to_pylist())) == list(range(10))


def test_make_data_publishes_what_is_built_to_shared_storage(tmp_path, capsys):
    """COURSE_DATA_DIR on shared storage: `make data` copies the checkout's built data sets there, once."""
    built_here = tmp_path / "checkout-data"
    source = built_here / STANDIN_IMAGENETTE
    (source / "val").mkdir(parents=True)
    (source / "labels.csv").write_text("file_name,label\n")
    (source / "val" / "a.JPEG").write_bytes(b"jpeg")
    shared = tmp_path / "cluster_storage" / "data"
    target = build.build(STANDIN_IMAGENETTE, shared, built_here=built_here)
    assert target == shared / STANDIN_IMAGENETTE
    assert (target / "val" / "a.JPEG").read_bytes() == b"jpeg" and (target / "labels.csv").exists()
    assert f"published {source} to {target}" in capsys.readouterr().out
    assert not list(shared.glob(".*.partial")), "no half-copied folder is left"
    build.build(STANDIN_IMAGENETTE, shared, built_here=built_here)
    assert "kept" in capsys.readouterr().out, "published once"
