import numpy as np
import pytest
import torch
from PIL import Image

from course.build import standin_processor
from helpers.features import collate, make_transform, pixel_values, to_rgb
from helpers.metrics import NOISE_LEVEL, Discordant, accuracy_for_trainer, load_accuracy, mcnemar


@pytest.fixture(scope="module")
def processor():
    return standin_processor()


def test_grayscale_and_arrays_become_rgb():
    gray = Image.new("L", (10, 12))
    assert to_rgb(gray).mode == "RGB" and to_rgb(gray).size == (10, 12)
    assert to_rgb(np.zeros((12, 10, 3), np.uint8)).mode == "RGB"
    assert to_rgb(np.zeros((1, 12, 10), np.uint8).transpose(1, 2, 0)).mode == "RGB"  # (H, W, 1) grayscale


def test_pixel_values_shape_dtype_and_range(processor):
    images = [Image.new("RGB", (96, 80), (255, 0, 0)), Image.new("L", (50, 50), 0)]
    values = pixel_values(processor, images)
    assert values.shape == (2, 3, 64, 64) and values.dtype == torch.float32
    assert values[0, 0].max() == pytest.approx(1.0) and values[1].min() == pytest.approx(-1.0)


def test_transform_and_collate_make_a_trainer_batch(processor):
    transform = make_transform(processor)
    out = transform({"image": [Image.new("RGB", (96, 96))] * 3, "labels": [0, 2, 1]})
    examples = [{"pixel_values": out["pixel_values"][i], "labels": out["labels"][i]} for i in range(3)]
    batch = collate(examples)
    assert batch["pixel_values"].shape == (3, 3, 64, 64)
    assert batch["labels"].dtype == torch.int64 and batch["labels"].tolist() == [0, 2, 1]


def test_accuracy_metric_loads_offline_and_counts():
    metric = load_accuracy()
    assert metric.compute(predictions=[0, 1, 1, 2], references=[0, 1, 2, 2]) == {"accuracy": 0.75}
    metric.add_batch(predictions=[1, 1], references=[1, 0])
    metric.add_batch(predictions=[2], references=[2])
    assert metric.compute()["accuracy"] == pytest.approx(2 / 3)


def test_accuracy_for_trainer_takes_argmax_of_logits():
    compute = accuracy_for_trainer(load_accuracy())
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert compute((logits, np.array([1, 1, 1]))) == {"accuracy": pytest.approx(2 / 3)}


def test_an_empty_split_is_an_error_not_accuracy_zero():
    import numpy as np
    import pytest
    import torch

    from helpers.loops import validate
    from helpers.metrics import share_correct

    with pytest.raises(ValueError, match="the held-out split is empty"):
        share_correct(np.array([]), np.array([]), "held-out")
    assert share_correct(np.array([1, 0]), np.array([1, 1]), "test") == 0.5
    with pytest.raises(ValueError, match="the validation split is empty"):
        validate(torch.nn.Linear(2, 2), [], torch.device("cpu"))


def answers(labels: np.ndarray, wrong: list[int]) -> np.ndarray:
    """Made-up predictions: ``labels``, except at the positions ``wrong`` (off by one class)."""
    predictions = labels.copy()
    predictions[wrong] = (predictions[wrong] + 1) % 10
    return predictions


def test_mcnemar_reads_only_the_images_the_two_models_disagree_on():
    """100 images; both wrong on 0-19; the first also wrong on 20, the second on 21-29: 9 images only the first got
    right against 1, whatever the 70 both got right. The exact two-sided p-value of 1 in 10 at p = 1/2 is
    2 x (1 + 10) / 2**10."""
    labels = np.arange(100) % 10
    first = answers(labels, [*range(20), 20]) == labels
    second = answers(labels, [*range(20), *range(21, 30)]) == labels
    assert (first.mean(), second.mean()) == (0.79, 0.71)
    paired = mcnemar(first, second)
    assert (paired.only_first, paired.only_second) == (9, 1)
    assert paired.p_value == pytest.approx(2 * 11 / 2**10)  # 0.0215
    assert paired.beyond_noise() and paired.p_value < NOISE_LEVEL
    assert mcnemar(second, first) == Discordant(1, 9, paired.p_value), "the same test, the other way round"


def test_mcnemar_sees_no_gap_in_an_even_split_nor_in_the_same_answers():
    labels = np.arange(40) % 10
    first, second = answers(labels, [0, 1, 2]) == labels, answers(labels, [3, 4, 5]) == labels
    assert mcnemar(first, second) == Discordant(3, 3, 1.0)
    assert not mcnemar(first, second).beyond_noise()
    assert mcnemar(first, first) == Discordant(0, 0, 1.0), "no disagreement: nothing tells them apart"
    right = labels == labels
    assert mcnemar(right, answers(labels, [*range(6)]) == labels) == Discordant(6, 0, pytest.approx(2 / 2**6))
    assert mcnemar(right, answers(labels, [*range(6)]) == labels).beyond_noise(), "6 against 0: p = 0.031"
    assert not mcnemar(right, answers(labels, [*range(5)]) == labels).beyond_noise(), "5 against 0: p = 0.0625"
    with pytest.raises(ValueError, match="not the same images"):
        mcnemar(first, first[:-1])
    with pytest.raises(ValueError, match="the test split is empty"):
        mcnemar(first[:0], first[:0])
