"""Lesson 01's checks (course.exercises.local_finetune): the common wrong answers are refused with a message that
teaches, the right ones pass.

The answers a learner who half-understood would write, each refused below:

01.1 ``freeze_backbone(model)``
  - every parameter frozen, the head included; the head frozen instead of the backbone;
  - a part of the backbone only (the embeddings, or the layers without the embeddings and the last layer norm);
  - what freezes nothing: an attribute set on the module (``model.vit.requires_grad = False``), ``eval()``,
    ``torch.no_grad()``, a new model built and frozen instead of the one given;
  - an error (a module name that is not there).
01.2 ``to_model_inputs(images, processor)``
  - the processor without ``return_tensors`` (lists), with ``"np"`` (arrays), the tensor without its dict;
  - a size written in (224, the real ViT's) instead of the processor's own; only the first image processed;
  - the images scaled by hand first, normalisation switched off (``do_normalize=False``), a normalisation of one's
    own; the tensor made half precision;
  - stacked tensors that never went through the processor; ``None``.
"""

from __future__ import annotations

import torch
from exercise_checks import expect, todo

from course.build import standin_processor
from course.exercises import (
    checking,
    local_finetune,
)


def test_freeze_backbone():
    def freeze_everything(model):
        for p in model.parameters():
            p.requires_grad = False

    def freeze_the_embeddings_only(model):
        for p in model.vit.embeddings.parameters():
            p.requires_grad = False

    expect(local_finetune.check_freeze_backbone(freeze_everything), checking.WRONG, "no parameter trains any more")
    expect(
        local_finetune.check_freeze_backbone(freeze_the_embeddings_only), checking.WRONG, "backbone parameters still"
    )

    def right(model):
        for p in model.vit.parameters():
            p.requires_grad = False

    expect(local_finetune.check_freeze_backbone(right), checking.DONE, "only the head trains")


def test_model_inputs():
    processor = standin_processor()

    def unresized(images, processor):
        return {"pixel_values": torch.stack([torch.zeros(3, 80, 80) for _ in images])}

    expect(
        local_finetune.check_model_inputs(unresized, processor),
        checking.WRONG,
        "shape (4, 3, 80, 80)",
        "expects (4, 3, 64, 64)",
        "processor",
    )
    expect(local_finetune.check_model_inputs(lambda i, p: p(i), processor), checking.WRONG, "return_tensors")
    not_normalised = lambda i, p: p(i, return_tensors="pt", do_normalize=False)  # noqa: E731
    expect(
        local_finetune.check_model_inputs(not_normalised, processor), checking.WRONG, "not normalised", "do_normalize"
    )

    def own_normalisation(images, processor):  # right shape and range, but not the processor's mean and std
        pixels = processor(images, return_tensors="pt", do_normalize=False)["pixel_values"]
        return {"pixel_values": pixels * 2 - 1.2}

    expect(local_finetune.check_model_inputs(own_normalisation, processor), checking.WRONG, "call the processor itself")
    expect(local_finetune.check_model_inputs(lambda i, p: p(i, return_tensors="pt"), processor), checking.DONE)


def test_freeze_backbone_names_each_half_right_answer():
    """01.1: an attribute set on the module (it freezes nothing), eval mode, the head frozen instead; other right
    answers."""

    def attribute_only(model):  # a plain attribute on the module: no parameter changes
        model.vit.requires_grad = False

    def eval_mode(model):  # eval() switches dropout off; every parameter still trains
        model.vit.eval()

    def head_frozen(model):
        for p in model.classifier.parameters():
            p.requires_grad = False

    check = local_finetune.check_freeze_backbone
    expect(check(attribute_only), checking.WRONG, "backbone parameters still train", "requires_grad=False")
    expect(check(eval_mode), checking.WRONG, "backbone parameters still train")
    expect(check(head_frozen), checking.WRONG, "backbone parameters still train")
    expect(check(lambda model: model.nope), checking.WRONG, "it raised AttributeError")
    expect(check(todo), checking.NOT_DONE)

    def by_name(model):
        for name, p in model.named_parameters():
            p.requires_grad = name.startswith("classifier.")

    def requires_grad_(model):
        model.base_model.requires_grad_(False)
        return model  # a value returned as well: the check reads the model it gave

    for right in (by_name, requires_grad_):
        expect(check(right), checking.DONE, "only the head trains")


def test_model_inputs_names_each_half_right_answer():
    """01.2: numpy arrays, the tensor without its dict, images scaled by hand; other right answers."""
    processor = standin_processor()
    check = local_finetune.check_model_inputs
    expect(check(lambda i, p: p(i, return_tensors="np"), processor), checking.WRONG, "ndarray", "return_tensors")
    only_the_tensor = lambda i, p: p(i, return_tensors="pt")["pixel_values"]  # noqa: E731
    expect(check(only_the_tensor, processor), checking.WRONG, "it returned Tensor", "`pixel_values` entry")

    def scaled_by_hand(images, processor):  # arrays in [0, 1], rescaled again by the processor
        import numpy as np

        return processor([np.asarray(i.convert("RGB")) / 255.0 for i in images], return_tensors="pt")

    expect(check(scaled_by_hand, processor), checking.WRONG, "call the processor itself", "on the PIL images")
    expect(check(lambda i, p: None, processor), checking.WRONG, "it returned NoneType")
    expect(check(todo, processor), checking.NOT_DONE)

    keyword = lambda i, p: p(images=i, return_tensors="pt")  # noqa: E731
    as_dict = lambda i, p: {"pixel_values": p(i, return_tensors="pt").pixel_values}  # noqa: E731
    plain_dict = lambda i, p: dict(p(i, return_tensors="pt"))  # noqa: E731
    for right in (keyword, as_dict, plain_dict):
        expect(check(right, processor), checking.DONE, "normalised")


def test_freeze_backbone_says_when_nothing_changed_and_names_a_part_frozen():
    """01.1: what freezes nothing gets "nothing changed", and says what does; half of the backbone names a parameter
    still training."""
    import torch

    from course.build import standin_vit

    check = local_finetune.check_freeze_backbone

    def no_grad(model):  # a context for computations: it changes no parameter
        with torch.no_grad():
            for p in model.vit.parameters():
                p.detach()

    def a_new_model(model):  # freezes a model of its own, not the one it is given
        other = standin_vit(["dog", "fish"])
        for p in other.vit.parameters():
            p.requires_grad = False
        return other

    def layers_only(model):  # the embeddings and the last layer norm still train
        for p in model.vit.layers.parameters():
            p.requires_grad = False

    for nothing in (no_grad, a_new_model):
        expect(check(nothing), checking.WRONG, "nothing changed", "in the model your function is given")
    expect(check(layers_only), checking.WRONG, "backbone parameters still train", "vit.embeddings")

    def all_then_head(model):
        model.requires_grad_(False)
        model.classifier.requires_grad_(True)

    def all_but_the_last_two(model):  # the head's weight and bias are the last two parameters
        for p in list(model.parameters())[:-2]:
            p.requires_grad = False

    for right in (all_then_head, all_but_the_last_two):
        expect(check(right), checking.DONE, "only the head trains")


def test_model_inputs_refuses_a_size_written_in_one_image_and_half_precision():
    """01.2: the real ViT's 224 written in, only the first image, float16; a right answer that converts to RGB."""
    processor = standin_processor()
    check = local_finetune.check_model_inputs
    fixed_size = lambda i, p: p(i, return_tensors="pt", size={"height": 224, "width": 224})  # noqa: E731
    expect(check(fixed_size, processor), checking.WRONG, "(4, 3, 224, 224)", "expects (4, 3, 64, 64)")
    first_only = lambda i, p: p(i[0], return_tensors="pt")  # noqa: E731
    expect(check(first_only, processor), checking.WRONG, "(1, 3, 64, 64) for 4 images", "every image")
    half = lambda i, p: {"pixel_values": p(i, return_tensors="pt")["pixel_values"].half()}  # noqa: E731
    expect(check(half, processor), checking.WRONG, "torch.float16", "float32")
    rgb = lambda i, p: p([image.convert("RGB") for image in i], return_tensors="pt")  # noqa: E731
    expect(check(rgb, processor), checking.DONE, "normalised")
