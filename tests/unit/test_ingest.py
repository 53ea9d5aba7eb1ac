"""The label join (notebook 03's own), channel counts and the labels writer, on numpy batches (no Ray needed)."""

import numpy as np
import pandas as pd
import pytest
from lesson_code import from_notebook

from course import config
from course.sources import STANDIN_IMAGENETTE, get_sources
from helpers import catalog
from helpers.ingest import (
    add_shapes,
    channels,
    check_label_table,
    check_labels,
    ensure_labels,
    file_name,
    labels_from_folders,
)

STANDIN = config.DATA_DIR / STANDIN_IMAGENETTE


def mixed_batch() -> dict[str, np.ndarray]:
    """A batch as Ray Data returns it when grayscale and colour images share a block."""
    images = np.empty(4, dtype=object)
    images[:] = [np.zeros((8, 8, 3), np.uint8), np.zeros((1, 8, 8), np.uint8), np.ones((8, 8, 3), np.uint8),
                 np.zeros((8, 8), np.uint8)]  # fmt: skip
    return {"image": images, "path": np.array([f"s3://b/train/n1/img{i}.JPEG" for i in range(4)])}


def test_file_name_is_the_last_part_of_a_path_or_uri():
    assert file_name("/data/train/n1/a.JPEG") == "a.JPEG"
    assert file_name("s3://anonymous@bucket/train/n1/b.JPEG") == "b.JPEG"


def test_labels_follow_file_names_not_row_order():
    add_labels = from_notebook("03_ray_data", "add_labels")
    batch = {"path": np.array(["/d/x/b.png", "/d/x/a.png", "/d/x/c.png"])}
    out = add_labels(batch, {"a.png": "dog", "b.png": "fish", "c.png": "dog"})
    assert out["label"].tolist() == ["fish", "dog", "dog"]
    assert out["file_name"].tolist() == ["b.png", "a.png", "c.png"]


def test_a_missing_label_is_reported_by_file_name():
    keys = pd.DataFrame({"file_name": ["a.png", "b.png", "c.png"], "label": ["dog", "", "fish"]})
    with pytest.raises(ValueError, match=r"1 image\(s\) have no row.*b\.png"):
        check_labels(keys)


def test_an_image_is_never_counted_twice():
    keys = pd.DataFrame({"file_name": ["a.png", "a.png", "c.png"], "label": ["dog", "dog", "fish"]})
    with pytest.raises(ValueError, match="a.png"):
        check_labels(keys)


def test_labels_are_counted_per_class():
    keys = pd.DataFrame({"file_name": ["a", "b", "c"], "label": ["dog", "fish", "dog"]})
    assert check_labels(keys)["images"].to_dict() == {"dog": 2, "fish": 1}


def test_a_labels_file_with_repeats_or_without_its_columns_is_refused():
    with pytest.raises(ValueError, match="more than once.*a.png"):
        check_label_table(pd.DataFrame({"file_name": ["a.png", "a.png"], "label": ["dog", "fish"]}))
    with pytest.raises(ValueError, match="file_name,label"):
        check_label_table(pd.DataFrame({"name": ["a.png"], "label": ["dog"]}))


@pytest.mark.parametrize(
    ("shape", "expected"), [((8, 8, 3), 3), ((8, 8), 1), ((1, 8, 8), 1), ((8, 8, 1), 1), ((8, 8, 4), 4)]
)
def test_channels_are_counted_for_every_layout(shape, expected):
    assert channels(np.zeros(shape, np.uint8)) == expected


def test_ndim_misses_grayscale_in_a_mixed_block_but_channels_do_not():
    shapes = add_shapes(mixed_batch())
    assert shapes["ndim"].tolist() == [3, 3, 3, 2]  # the (1, H, W) image looks three-dimensional
    assert shapes["channels"].tolist() == [3, 1, 3, 1]


def test_labels_from_folders_rebuild_the_standin_labels_file():
    rebuilt = labels_from_folders(str(STANDIN), catalog.IMAGENETTE_SYNSETS)
    shipped = pd.read_csv(STANDIN / "labels.csv")
    key = ["file_name"]
    pd.testing.assert_frame_equal(
        rebuilt.sort_values(key).reset_index(drop=True), shipped.sort_values(key).reset_index(drop=True)
    )


def test_a_missing_standin_labels_file_names_the_build_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        ensure_labels(get_sources("standin", data_dir=tmp_path))
