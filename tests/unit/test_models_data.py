import numpy as np
import pytest
import torch

from course import build, config
from course.build import standin_processor, standin_vit
from course.sources import STANDIN_VIT, get_sources
from helpers import catalog
from helpers.beans import class_names_of, load_beans
from helpers.models import load_classifier, load_processor, predict

CHECKPOINT = config.DATA_DIR / STANDIN_VIT


def test_tiny_vit_has_the_promised_size():
    model = standin_vit(["a", "b"])
    assert 0.4e6 < sum(p.numel() for p in model.parameters()) < 0.8e6
    assert model(pixel_values=torch.zeros(2, 3, 64, 64)).logits.shape == (2, 2)


def test_checkpoint_loads_with_a_new_head():
    labels = ["angular_leaf_spot", "bean_rust", "healthy"]
    model = load_classifier(str(CHECKPOINT), labels)
    assert model.classifier.out_features == 3
    assert model.config.id2label == dict(enumerate(labels)) and model.config.label2id["healthy"] == 2
    assert load_processor(str(CHECKPOINT)).size["height"] == 64


def test_checkpoint_is_really_pretrained():
    """Its own head classifies the pretraining shapes far above chance (0.1): not random weights."""
    model = load_classifier(str(CHECKPOINT), catalog.CIFAR10_CLASSES)  # same labels: the head is kept
    images, labels = build.shapes_arrays("test", 200)
    pixels = standin_processor()(list(images), return_tensors="pt")["pixel_values"]
    assert (predict(model, pixels) == labels).mean() > 0.4


def test_missing_checkpoint_names_the_build_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        load_classifier(str(tmp_path / "no-model"), ["a", "b"])


def test_load_beans_reads_the_standin_with_beans_columns():
    ds = load_beans(get_sources("standin"))
    assert set(ds) == set(catalog.BEANS_SPLITS)
    assert {split: ds[split].num_rows for split in ds} == catalog.BEANS_SPLITS
    assert class_names_of(ds) == catalog.BEANS_CLASSES
    assert "labels" in ds["train"].column_names and "image" in ds["train"].column_names
    assert np.bincount(ds["validation"]["labels"]).min() >= 40


def test_missing_beans_folder_names_the_build_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        load_beans(get_sources("standin", tmp_path))
