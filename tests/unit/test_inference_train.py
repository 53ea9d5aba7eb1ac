"""Notebook 03's featurizer and inference classes on one batch; the batch arithmetic of the train loops."""

import numpy as np
import pytest
from lesson_code import from_notebook
from ray.train import Checkpoint

from course.build import standin_processor, standin_vit
from helpers import inference
from helpers.train import per_worker


def image_batch() -> dict[str, np.ndarray]:
    images = np.empty(3, dtype=object)
    images[:] = [np.full((80, 80, 3), 200, np.uint8), np.zeros((1, 80, 80), np.uint8), np.zeros((50, 70, 3), np.uint8)]
    return {
        "image": images,
        "label": np.array(["fish", "dog", "fish"]),
        "file_name": np.array(["a.JPEG", "b.JPEG", "c.JPEG"]),
    }


Featurizer, ImageClassifier = from_notebook("03_ray_data", "Featurizer", "ImageClassifier")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A Ray Train checkpoint's folder as RayTrainReportCallback writes it: the Hugging Face files in checkpoint/."""
    root = tmp_path_factory.mktemp("ray-checkpoint")
    folder = root / inference.HF_FOLDER
    standin_vit(["dog", "fish"]).save_pretrained(folder)
    standin_processor().save_pretrained(folder)
    return root


def test_featurizer_gives_float_pixels_and_int_labels(model_dir):
    out = Featurizer(str(model_dir / inference.HF_FOLDER), class_names=["dog", "fish"])(image_batch())
    assert out["pixel_values"].shape == (3, 3, 64, 64) and out["pixel_values"].dtype == np.float32
    assert out["labels"].tolist() == [1, 0, 1] and out["labels"].dtype == np.int64
    assert -1.0 <= out["pixel_values"].min() and out["pixel_values"].max() <= 1.0
    assert out["file_name"].tolist() == ["a.JPEG", "b.JPEG", "c.JPEG"]  # kept for the split by file name


def test_classifier_labels_a_whole_batch_in_one_forward_pass(model_dir):
    classifier = ImageClassifier(Checkpoint.from_directory(model_dir))
    calls = []
    forward = classifier.model.forward
    classifier.model.forward = lambda *args, **kwargs: calls.append(1) or forward(*args, **kwargs)
    out = classifier(image_batch())
    assert len(calls) == 1
    assert out["predicted"].shape == (3,) and set(out["predicted"]) <= {"dog", "fish"}
    assert out["label"].tolist() == ["fish", "dog", "fish"]  # the other columns pass through
    again = classifier(image_batch())  # the same actor's next batch: its name, drawn once, and its count of batches
    assert set(out["actor"]) == set(again["actor"]) and len(set(out["actor"])) == 1
    assert out["batch"].tolist() == [1, 1, 1] and again["batch"].tolist() == [2, 2, 2]
    assert set(ImageClassifier(Checkpoint.from_directory(model_dir))(image_batch())["actor"]) != set(out["actor"])


def test_the_helpers_classifier_labels_as_notebook_03s_does(model_dir):
    """helpers.inference.ImageClassifier, for the lessons after 03, is a twin of notebook 03's class."""
    lesson = ImageClassifier(Checkpoint.from_directory(model_dir))(image_batch())["predicted"]
    helper = inference.ImageClassifier(Checkpoint.from_directory(model_dir))(image_batch())["predicted"]
    assert helper.tolist() == lesson.tolist()


@pytest.mark.parametrize(("global_batch", "workers", "expected"), [(32, 1, 32), (32, 2, 16), (512, 4, 128), (10, 3, 3)])
def test_a_global_batch_is_split_across_workers(global_batch, workers, expected):
    assert per_worker(global_batch, workers) == expected


def test_a_batch_smaller_than_the_worker_count_is_refused():
    with pytest.raises(ValueError, match="cannot be split across 4 workers"):
        per_worker(2, 4)
