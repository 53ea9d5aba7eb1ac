"""Where a lesson writes code in its cells that ``helpers`` also holds for the lessons after it, the two agree."""

import torch
from lesson_code import from_notebook
from PIL import Image

from helpers import features
from helpers.models import standin_processor


def test_notebook_01s_transform_and_collator_are_those_the_later_lessons_import():
    transform, collate = from_notebook("01_local_finetune", "transform", "collate")
    processor = standin_processor()
    transform.__globals__["processor"] = processor  # the notebook's own, made in an earlier cell
    batch = {"image": [Image.new("RGB", (80, 60), (200, 10, 10)), Image.new("L", (40, 90), 128)], "labels": [2, 0]}
    lesson, helper = transform(batch), features.make_transform(processor)(batch)
    assert torch.equal(lesson["pixel_values"], helper["pixel_values"])
    assert list(lesson["labels"]) == list(helper["labels"])
    examples = [{"pixel_values": lesson["pixel_values"][i], "labels": lesson["labels"][i]} for i in range(2)]
    for column, stacked in collate(examples).items():
        assert torch.equal(stacked, features.collate(examples)[column]), column
