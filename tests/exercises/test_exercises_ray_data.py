"""Lesson 03's checks (course.exercises.ray_data): the common wrong answers are refused with a message that
teaches, the right ones pass.

The answers a learner who half-understood would write, each refused below:

03.1 ``ConfidentClassifier`` (an actor class for ``map_batches``)
  - a function, or a class still untouched;
  - the model loaded in ``__call__``, for every batch; one forward pass per image;
  - the raw logits as the confidence (no softmax); the probability of the first class, not of the predicted one;
  - the class id instead of its name; class names written in (the lesson's two) instead of ``id2label``;
  - the processor called on the raw arrays (a grayscale and an RGBA image break it);
  - only the new columns returned, or nothing returned; one confidence for the whole batch;
  - a class right in this process that fails in an actor (a model read from the driver's disk).
03.2 ``mirror_half(batch)``
  - upside down (axis 0, or ``np.fliplr`` on the whole 4-D batch), the colour channels reversed, ``np.flip``
    without an axis;
  - every image, or all or none of a batch at once (one coin for the batch);
  - ``len(batch)`` for the number of images (it counts the columns);
  - a fixed pattern, or a generator seeded in the function (the same images every epoch);
  - the batch sliced as one 4-D array (fails on images of different sizes), a choice array of a fixed length
    (zipped strictly or not);
  - only the chosen images, the other columns dropped, nothing returned.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from exercise_checks import expect, leave_ray, todo
from transformers import AutoImageProcessor, AutoModelForImageClassification

from course.exercises import (
    checking,
    ray_data,
)
from helpers.features import pixel_values


def test_mirror_half():
    def upside_down(batch):
        images = batch["image"].copy()  # Ray Data's batch is read-only: a copy to write into
        images[::2] = images[::2, ::-1]
        batch["image"] = images
        return batch

    def all_of_them(batch):
        batch["image"] = batch["image"][:, :, ::-1]
        return batch

    def half(batch):
        images = batch["image"].copy()
        images[::2] = images[::2, :, ::-1]
        batch["image"] = images
        return batch

    def every_other_one(batch):
        batch["image"] = [image[:, ::-1] if i % 2 else image for i, image in enumerate(batch["image"])]
        return batch

    expect(ray_data.check_mirror_half(upside_down), checking.WRONG, "upside down", "width axis")
    expect(ray_data.check_mirror_half(all_of_them), checking.WRONG, "100% of the images")
    expect(ray_data.check_mirror_half(half), checking.WRONG, "different sizes", "each image by itself")
    expect(ray_data.check_mirror_half(every_other_one), checking.WRONG, "the same images both times", "not random")


def test_mirror_half_names_each_half_right_answer():
    """03.2: a seed fixed in the function, the colour channels flipped, the unchosen images dropped, nothing
    returned; other right answers (a mask and `np.where`, `np.fliplr`, Python's `random`)."""

    def seeded(batch):
        chosen = np.random.default_rng(0).random(len(batch["image"])) < 0.5
        batch["image"] = [image[:, ::-1] if flip else image for image, flip in zip(batch["image"], chosen, strict=True)]
        return batch

    def colours(batch):
        chosen = np.random.default_rng().random(len(batch["image"])) < 0.5
        batch["image"] = [
            image[..., ::-1] if flip else image for image, flip in zip(batch["image"], chosen, strict=True)
        ]
        return batch

    def only_the_chosen(batch):
        chosen = np.random.default_rng().random(len(batch["image"])) < 0.5
        return {"image": batch["image"][chosen][:, :, ::-1], "label": batch["label"]}

    def in_place_without_return(batch):
        batch["image"] = [image[:, ::-1] for image in batch["image"]]

    check = ray_data.check_mirror_half
    expect(check(seeded), checking.WRONG, "the same images both times", "without a seed")
    expect(check(colours), checking.WRONG, "colour channels reversed", "image[:, ::-1]")
    expect(check(only_the_chosen), checking.WRONG, "came back of 100", "the others as they were")
    expect(check(in_place_without_return), checking.WRONG, "return the batch")
    expect(check(todo), checking.NOT_DONE)


def test_mirror_half_refuses_a_write_into_the_batch_and_a_batch_without_its_other_columns():
    """03.2: Ray Data's batches are read-only views of its blocks (``zero_copy_batch=True``), and hold more columns
    than ``image`` and ``label``: writing into the batch's array, or returning only the two columns, is refused."""

    def in_place(batch):
        chosen = np.random.default_rng().random(len(batch["image"])) < 0.5
        for index in np.flatnonzero(chosen):
            batch["image"][index] = batch["image"][index][:, ::-1]
        return batch

    def two_columns(batch):
        chosen = np.random.default_rng().random(len(batch["image"])) < 0.5
        images = [image[:, ::-1] if flip else image for image, flip in zip(batch["image"], chosen, strict=True)]
        return {"image": images, "label": batch["label"]}

    check = ray_data.check_mirror_half
    expect(check(in_place), checking.WRONG, "read-only", "zero_copy_batch=True", "Build the mirrored images anew")
    expect(check(two_columns), checking.WRONG, "other column(s) ['path']", "return it whole")


def test_the_actor_class_check_refuses_what_is_no_actor_class_before_ray_starts():
    """03.1: a function, an untouched class, a class whose `__call__` is still untouched: no Ray needed for these."""
    import ray

    leave_ray()

    def a_function(batch):
        return batch

    class Untouched:
        def __init__(self, checkpoint):
            raise NotImplementedError

        def __call__(self, batch):
            raise NotImplementedError

    class HalfDone:
        def __init__(self, checkpoint):
            self.checkpoint = checkpoint

        def __call__(self, batch):
            raise NotImplementedError  # your code

    expect(ray_data.check_confident_classifier(a_function), checking.WRONG, "is not a class", "`__init__` loads")
    expect(ray_data.check_confident_classifier(Untouched), checking.NOT_DONE)
    expect(ray_data.check_confident_classifier(HalfDone), checking.NOT_DONE)
    assert not ray.is_initialized(), "the check started Ray for an answer it judges without it"


def test_mirror_half_refuses_the_wrong_axis_one_coin_per_batch_and_a_fixed_length():
    """03.2: ``np.fliplr`` on the 4-D batch, ``np.flip`` without an axis, one coin for the whole batch, a choice of
    the check's batch size written in, the labels dropped."""
    import random

    check = ray_data.check_mirror_half

    def fliplr_the_batch(batch):  # on (N, H, W, C), fliplr flips axis 1: every image upside down
        chosen = np.random.default_rng().random(len(batch["image"])) < 0.5
        batch["image"] = np.where(chosen[:, None, None, None], np.fliplr(batch["image"]), batch["image"])
        return batch

    def flip_every_axis(batch):
        batch["image"] = [np.flip(image) if random.random() < 0.5 else image for image in batch["image"]]
        return batch

    def one_coin(batch):
        if random.random() < 0.5:
            batch["image"] = [image[:, ::-1] for image in batch["image"]]
        return batch

    def sixty_four(batch):  # a length written in (the lesson's batch size): zip(strict=True) raises on 100 images
        chosen = np.random.default_rng().random(64) < 0.5
        batch["image"] = [image[:, ::-1] if flip else image for image, flip in zip(batch["image"], chosen, strict=True)]
        return batch

    def sixty_four_zipped(batch):  # the same with a plain zip: it stops after 64 images, and 4 pass
        chosen = np.random.default_rng().random(64) < 0.5
        batch["image"] = [image[:, ::-1] if flip else image for image, flip in zip(batch["image"], chosen)]  # noqa: B905
        return batch

    def images_only(batch):
        return {"image": [image[:, ::-1] if random.random() < 0.5 else image for image in batch["image"]]}

    expect(check(fliplr_the_batch), checking.WRONG, "upside down", "width axis")
    expect(check(flip_every_axis), checking.WRONG, "neither unchanged nor mirrored")
    expect(check(one_coin), checking.WRONG, "the same choice", "one draw", "about half, at random")
    expect(check(sixty_four), checking.WRONG, "on a batch of 100 images it raised ValueError", "`len(batch['image'])`")
    expect(check(sixty_four_zipped), checking.WRONG, "64 images came back of 100", "`len(batch['image'])`")
    expect(check(images_only), checking.WRONG, "return the batch: a dict with its columns")

    def enough_for_any_batch(batch):  # a length written in "large enough" (walk of 3995af6): right up to 1000 images
        chosen = np.random.default_rng().random(1000) < 0.5
        batch["image"] = [image[:, ::-1] if flip else image for image, flip in zip(batch["image"], chosen)]  # noqa: B905
        return batch

    def enough_strict(batch):  # cut to the batch, with zip(strict=True): it raises on the large batch
        chosen = (np.random.default_rng().random(1024) < 0.5)[: len(batch["image"])]
        batch["image"] = [image[:, ::-1] if flip else image for image, flip in zip(batch["image"], chosen, strict=True)]
        return batch

    def the_checks_own_size(batch):  # the check's first batch size written in: right on it and on 4 photos
        chosen = np.random.default_rng().random(100) < 0.5
        batch["image"] = [image[:, ::-1] if flip else image for image, flip in zip(batch["image"], chosen)]  # noqa: B905
        return batch

    expect(check(enough_for_any_batch), checking.WRONG, "on a batch of 5000 images, 1000 came back", "`len(batch")
    expect(check(enough_strict), checking.WRONG, "on a batch of 5000 images it raised ValueError", "`len(batch")
    expect(check(the_checks_own_size), checking.WRONG, "on a batch of 5000 images, 100 came back", "fixed number")

    def columns_for_images(batch):  # len(batch) taken for the number of images (walk of c476c86): it is 3 columns
        chosen = np.random.default_rng().random(len(batch)) < 0.5
        batch["image"] = [image[:, ::-1] if flip else image for image, flip in zip(batch["image"], chosen)]  # noqa: B905
        return batch

    expect(check(columns_for_images), checking.WRONG, "3 images came back of 100", "counts the batch's columns")

    def a_list(batch):
        return [image[:, ::-1] if random.random() < 0.5 else image for image in batch["image"]]

    def one_4d_array(batch):  # right on the check's first batch, which has one size; photos of several sizes are not
        chosen = np.random.default_rng().random(len(batch["image"])) < 0.5
        images = batch["image"].copy()
        images[chosen] = images[chosen][:, :, ::-1]
        batch["image"] = images
        return batch

    expect(check(a_list), checking.WRONG, "a dict with its columns (it returned list)")
    expect(check(one_4d_array), checking.WRONG, "different sizes", "not one 4-D array")


@pytest.mark.cluster
def test_the_mirror_check_runs_right_answers_in_ray_data_as_the_lesson_does():
    """03.2: after its own batches, the check runs the answer through Ray Data's ``map_batches`` (read-only batches,
    every column kept): three right answers, written differently, pass there too."""
    from course.cluster import init_ray

    init_ray()

    # defined here, not at the module's top: Ray's workers get them by value, as they get a notebook's
    def with_random(batch):
        import random

        batch["image"] = [np.fliplr(image) if random.random() < 0.5 else image for image in batch["image"]]
        return batch

    def with_a_mask(batch):  # a batch of one size at once; images of different sizes one by one
        images = batch["image"]
        chosen = np.random.default_rng().random(len(images)) < 0.5
        if isinstance(images, np.ndarray) and images.dtype != object:
            batch["image"] = np.where(chosen[:, None, None, None], images[:, :, ::-1], images)
        else:
            batch["image"] = [image[:, ::-1] if flip else image for image, flip in zip(images, chosen, strict=True)]
        return batch

    def a_copy_written_into(batch):  # right: the copy is the function's own
        images = batch["image"].copy()
        chosen = np.random.default_rng().random(len(images)) < 0.5
        for index in np.flatnonzero(chosen):
            images[index] = images[index][:, ::-1]
        return batch | {"image": images}

    for right in (with_random, with_a_mask, a_copy_written_into):
        expect(ray_data.check_mirror_half(right), checking.DONE, "in Ray Data's map_batches too")


def test_the_actor_class_check_judges_half_right_classes_in_this_process_without_ray(monkeypatch):
    """03.1: a softmax forgotten, the wrong class's probability, columns dropped, no batch returned, a function, a model
    loaded per batch or run per image: each refused in seconds, on batches made here as an actor would get them, and
    Ray never attached."""

    def no_ray() -> None:
        raise AssertionError("the check attached Ray for a wrong answer")

    monkeypatch.setattr(checking, "attach_ray", no_ray)
    monkeypatch.setattr(ray_data, "attach_ray", no_ray)
    expect(
        ray_data.check_confident_classifier(ForgetsToReturn), checking.WRONG, "returned NoneType", "return the batch"
    )
    expect(ray_data.check_confident_classifier(RawLogits), checking.WRONG, "softmax")
    first_class = ray_data.check_confident_classifier(FirstClass)
    expect(first_class, checking.WRONG, "of the *predicted* class")
    assert not re.search(r"\d\.\d{4}", first_class.message), first_class.message  # 0.741, not float32's 0.74099999
    expect(ray_data.check_confident_classifier(OnlyItsColumns), checking.WRONG, "return it whole")
    expect(ray_data.check_confident_classifier(LoadsEveryBatch), checking.WRONG, "once for every batch", "__init__")
    expect(ray_data.check_confident_classifier(OneImageAtATime), checking.WRONG, "3 forward passes", "whole batch")
    expect(ray_data.check_confident_classifier(ClassIds), checking.WRONG, "the class *name*", "id2label")
    expect(ray_data.check_confident_classifier(NamesWrittenIn), checking.WRONG, "IndexError", "`model.config.id2label")
    expect(ray_data.check_confident_classifier(RawArrays), checking.WRONG, "raised ValueError", "converts them to RGB")
    expect(ray_data.check_confident_classifier(OneValueForTheBatch), checking.WRONG, "one value per row")
    from transformers import PreTrainedModel

    assert not hasattr(PreTrainedModel, "_counted_by_check"), "the check left transformers' models counted"


@pytest.mark.cluster
def test_the_actor_class_check_runs_a_right_class_on_an_actor_pool_and_names_an_actors_error():
    """03.1: a class right in this process runs on an actor pool in Ray Data, as the lesson's does; what fails only
    there (here, in any process but this one) is named in one line, and Ray Data logs no traceback before it."""
    import logging

    import ray

    from course.cluster import init_ray

    init_ray()
    logged = []
    handler = logging.Handler()
    handler.emit = logged.append
    logging.getLogger("ray.data").addHandler(handler)
    # the classes travel to the actors by value, as a notebook's do: no worker can import this test module
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        failed = ray_data.check_confident_classifier(FailsInAnActor)
        expect(failed, checking.WRONG, "running it on an actor pool raised", "FileNotFoundError")
        assert not [record.getMessage()[:200] for record in logged if record.levelno >= logging.ERROR]
        expect(ray_data.check_confident_classifier(Classifier), checking.DONE, "never seen", "actor pool")
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        logging.getLogger("ray.data").removeHandler(handler)
        leave_ray()


# 03.1's answers: the right one, and what a half understanding writes
class Classifier:
    def __init__(self, checkpoint):
        with checkpoint.as_directory() as folder:
            self.processor = AutoImageProcessor.from_pretrained(Path(folder) / "checkpoint", backend="pil")
            self.model = AutoModelForImageClassification.from_pretrained(Path(folder) / "checkpoint").eval()

    @torch.no_grad()
    def scores(self, batch):
        return self.model(pixel_values=pixel_values(self.processor, list(batch["image"]))).logits

    def __call__(self, batch):
        probabilities = self.scores(batch).softmax(-1)
        batch["predicted"] = np.array([self.model.config.id2label[i] for i in probabilities.argmax(-1).tolist()])
        batch["confidence"] = probabilities.max(-1).values.numpy()
        return batch


class RawLogits(Classifier):
    def __call__(self, batch):
        logits = self.scores(batch)
        batch["predicted"] = np.array([self.model.config.id2label[i] for i in logits.argmax(-1).tolist()])
        batch["confidence"] = logits.max(-1).values.numpy()
        return batch


class FirstClass(Classifier):
    def __call__(self, batch):
        batch = super().__call__(batch)
        batch["confidence"] = self.scores(batch).softmax(-1)[:, 0].numpy()
        return batch


class OnlyItsColumns(Classifier):
    def __call__(self, batch):
        out = super().__call__(batch)
        return {"predicted": out["predicted"], "confidence": out["confidence"]}


class ForgetsToReturn(Classifier):
    def __call__(self, batch):
        super().__call__(batch)  # and returns None


class LoadsEveryBatch(Classifier):
    def __init__(self, checkpoint):
        self.checkpoint = checkpoint

    def __call__(self, batch):
        super().__init__(self.checkpoint)
        return super().__call__(batch)


class OneImageAtATime(Classifier):
    @torch.no_grad()
    def scores(self, batch):
        images = list(batch["image"])
        return torch.cat([self.model(pixel_values=pixel_values(self.processor, [i])).logits for i in images])


class ClassIds(Classifier):
    def __call__(self, batch):
        batch = super().__call__(batch)
        batch["predicted"] = self.scores(batch).argmax(-1).numpy()  # the id, not the class name
        return batch


class NamesWrittenIn(Classifier):  # the lesson's two class names, not the model's three
    def __call__(self, batch):
        batch = super().__call__(batch)
        batch["predicted"] = np.array([["dog", "fish"][i] for i in self.scores(batch).argmax(-1).tolist()])
        return batch


class RawArrays(Classifier):  # the processor on the arrays as they come: grayscale and RGBA break it
    @torch.no_grad()
    def scores(self, batch):
        pixels = self.processor(list(batch["image"]), return_tensors="pt")["pixel_values"]
        return self.model(pixel_values=pixels).logits


class OneValueForTheBatch(Classifier):  # the batch's top confidence, one number for all its rows
    def __call__(self, batch):
        batch = super().__call__(batch)
        batch["confidence"] = float(batch["confidence"].max())
        return batch


HERE = os.getpid()


class FailsInAnActor(Classifier):  # a model read from a folder only this process has (on a cluster: the driver's disk)
    def __init__(self, checkpoint):
        if os.getpid() != HERE:
            raise FileNotFoundError("/home/me/model: no such folder on this node")
        super().__init__(checkpoint)
