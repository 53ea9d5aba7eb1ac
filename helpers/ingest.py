"""Ray Data ingest of labelled image folders: readable files, labels files and their checks, channel counts."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.fs as pafs
import ray.data

from course.sources import Sources, require_local
from course.storage import filesystem
from helpers.catalog import IMAGENETTE_SYNSETS

Batch = dict[str, np.ndarray]
LABEL_COLUMNS = ["file_name", "label"]
SHOWN = 10  # how many offending file names an error message lists


def flag_unreadable(batch: Batch) -> Batch:
    """For each file (``bytes``), the reason it does not decode as an image, or ``""`` when it does."""
    from PIL import Image

    reasons = []
    for data in batch["bytes"]:
        try:
            Image.open(io.BytesIO(data)).load()  # decodes every pixel: finds truncated files too
            reasons.append("")
        except Exception as error:  # PIL raises OSError, SyntaxError, ValueError, ... for bad files
            reasons.append(f"{type(error).__name__}: {error}")
    return {"path": batch["path"], "problem": np.array(reasons)}


def class_folders(root: str, split: str) -> list[str]:
    """The folders of the course's imagenette classes in ``split``: ``<root>/<split>/<synset>`` (imagenette has ten)."""
    return [f"{root}/{split}/{synset}" for synset in IMAGENETTE_SYNSETS]


def require_readable_images(uri: str | list[str]) -> int:
    """The number of image files under ``uri`` (one or several) if every one decodes; else an error naming the bad ones.

    `read_images` stops on the first broken file without saying which it was: check first, fix, then read.
    """
    checked = ray.data.read_binary_files(uri, include_paths=True).map_batches(flag_unreadable).to_pandas()
    bad = checked[checked["problem"] != ""]
    if len(bad):
        listed = "; ".join(
            f"{file_name(p)} ({why})" for p, why in zip(bad["path"][:SHOWN], bad["problem"][:SHOWN], strict=True)
        )
        raise ValueError(
            f"{len(bad)} of {len(checked)} files under {', '.join(uri) if isinstance(uri, list) else uri} "
            f"are not readable images: {listed}"
            + (f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else "")
            + ". Replace them with good copies or delete them (a truncated download is the usual cause)."
        )
    return len(checked)


def file_name(path: str) -> str:
    """The last part of a path or URI: the key that ties an image to its row in ``labels.csv``."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def _listing(names: Sequence[str]) -> str:
    """A few names for an error message, with how many more there are."""
    shown = ", ".join(sorted(names)[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _repeated(names: pd.Series) -> list[str]:
    """The names that occur more than once, each listed once."""
    return names[names.duplicated()].unique().tolist()


def check_label_table(table: pd.DataFrame, source: str = "labels.csv") -> pd.DataFrame:
    """The table if it has ``file_name`` and ``label`` columns and one row per file; else a clear error."""
    missing = [c for c in LABEL_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{source} lacks the column(s) {missing}: its header must be `file_name,label`.")
    repeated = _repeated(table["file_name"])
    if repeated:
        raise ValueError(
            f"{len(repeated)} file name(s) appear more than once in {source}: {_listing(repeated)}. "
            "Keep exactly one row per image."
        )
    return table[LABEL_COLUMNS].astype(str)


def check_labels(keys: pd.DataFrame) -> pd.DataFrame:
    """Images per label from the ``file_name``/``label`` columns; fails naming unlabelled or repeated images."""
    unlabelled = keys.loc[keys["label"] == "", "file_name"].tolist()
    if unlabelled:
        raise ValueError(
            f"{len(unlabelled)} image(s) have no row in the labels file: {_listing(unlabelled)}. "
            "Add a `file_name,label` row for each, or remove the images."
        )
    repeated = _repeated(keys["file_name"])
    if repeated:
        raise ValueError(
            f"{len(repeated)} file name(s) occur in more than one folder: {_listing(repeated)}. "
            "File names are the join key: rename the copies."
        )
    return keys.groupby("label").size().rename("images").to_frame()


def channels(image: np.ndarray) -> int:
    """Colour channels of an image array: ``(H, W, C)`` has C; ``(H, W)`` and Ray's ``(1, H, W)`` have 1."""
    if image.ndim == 2 or image.shape[0] == 1:
        return 1
    return int(image.shape[-1])


def add_shapes(batch: Batch) -> Batch:
    """Add each image's ``shape`` (as text), ``ndim`` and ``channels``: for counting odd images.

    A copy of the ``add_shapes`` (and ``channels``) that notebook 03 writes in its cell of section 3, for the tests
    of real sources' layouts; ``tests/unit/test_lesson_twins.py`` keeps the two equal."""
    images = batch["image"]
    batch["shape"] = np.array([str(tuple(image.shape)) for image in images])
    batch["ndim"] = np.array([image.ndim for image in images])
    batch["channels"] = np.array([channels(image) for image in images])
    return batch


def labels_from_folders(
    root_uri: str, synsets: dict[str, str], splits: Sequence[str] = ("train", "val")
) -> pd.DataFrame:
    """A labels table for imagenette's layout ``<root>/<split>/<synset>/<file>``: the folder names the class."""
    fs, root = filesystem(root_uri)
    rows = []
    for split in splits:
        for synset, label in synsets.items():
            selector = pafs.FileSelector(f"{root}/{split}/{synset}", recursive=False)
            files = sorted(info.base_name for info in fs.get_file_info(selector) if info.is_file)
            rows += [(name, label) for name in files]
    return pd.DataFrame(rows, columns=LABEL_COLUMNS)


def ensure_labels(sources: Sources) -> str:
    """The labels file of the dogs-vs-fish images. Real imagenette ships none: write it from the folders."""
    path = Path(sources.imagenette_labels)
    if sources.kind == "real" and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        labels_from_folders(sources.imagenette, IMAGENETTE_SYNSETS).to_csv(path, index=False)
    return str(require_local(path, "dogs-vs-fish labels file"))
