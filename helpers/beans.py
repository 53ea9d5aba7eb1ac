"""Reading beans (notebooks 01, 02 and 02b), from the stand-in or the Hub, through one path."""

from __future__ import annotations

from datasets import DatasetDict, load_dataset

from course.sources import Sources, is_local, require_local


def load_beans(sources: Sources) -> DatasetDict:
    """beans (train/validation/test) with ``image`` and ``labels`` columns, local or from the Hub."""
    if not is_local(sources.beans):
        return load_dataset(sources.beans)
    folder = require_local(sources.beans, "beans-like leaf data set")
    # The imagefolder builder names the class column `label`; beans calls it `labels`.
    return load_dataset("imagefolder", data_dir=str(folder)).rename_column("label", "labels")


def class_names_of(dataset: DatasetDict, column: str = "labels") -> list[str]:
    """The class names of a classification data set, in label-id order."""
    return list(dataset["train"].features[column].names)
