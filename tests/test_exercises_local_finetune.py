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
