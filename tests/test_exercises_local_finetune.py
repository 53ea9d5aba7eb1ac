"""Lesson 01's checks (helpers.exercises.local_finetune): the common wrong answers are refused with a message that
teaches, the right one passes."""

from __future__ import annotations

import torch
from exercise_checks import expect, results_here, todo  # noqa: F401  (results_here: an autouse fixture)

from helpers.exercises import (
    checking,
    local_finetune,
)
from helpers.pipeline.models import standin_processor


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
