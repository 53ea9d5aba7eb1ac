"""The "Your turn" checks of notebook 01 (fine-tuning with Hugging Face) (rules: ``course.exercises.checking``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from course.exercises.checking import Verdict, attempt, check


def check_freeze_backbone(freeze_backbone: Callable[[torch.nn.Module], Any]) -> Verdict:
    """01.1: after ``freeze_backbone(model)``, only the classification head (``model.classifier``) trains."""
    from course.build import standin_vit

    def run() -> str:
        model = standin_vit(["dog", "fish"])
        attempt(freeze_backbone, model)
        trains = {name for name, p in model.named_parameters() if p.requires_grad}
        head = {name for name, _ in model.named_parameters() if name.startswith("classifier.")}
        assert trains, "no parameter trains any more: the head (`model.classifier`) must keep requires_grad=True"
        everything = {name for name, _ in model.named_parameters()}
        assert trains != everything, (
            f"nothing changed: all {len(everything - head)} backbone parameters still train, as before your function "
            "ran. Set `requires_grad=False` on every parameter of `model.base_model` (`model.vit` for a ViT), in the "
            "model your function is given (a new model, `eval()`, `torch.no_grad()` or an attribute set on the "
            "module freeze nothing)"
        )
        backbone = sorted(trains - head)
        assert not backbone, (
            f"{len(backbone)} backbone parameters still train (for example `{backbone[0]}`): "
            "the backbone is `model.base_model` (`model.vit` for a ViT); its parameters need requires_grad=False"
        )
        assert trains == head, f"the head is frozen too ({sorted(head - trains)}): leave `model.classifier` trainable"
        total = sum(p.numel() for p in model.parameters())
        kept = sum(p.numel() for name, p in model.named_parameters() if name in trains)
        return f"only the head trains: {kept:,} of {total:,} parameters ({kept / total:.2%})"

    return check("01.1", run)


def check_model_inputs(to_model_inputs: Callable, processor: Any) -> Verdict:
    """01.2: ``to_model_inputs(images, processor)`` gives the ``pixel_values`` the model takes, for PIL images."""
    from PIL import Image

    def run() -> str:
        rng = np.random.default_rng(0)
        images = [Image.fromarray(rng.integers(0, 256, (h, 48, 3), dtype=np.uint8)) for h in (40, 50, 60, 70)]
        inputs = attempt(to_model_inputs, images, processor)
        assert isinstance(inputs, Mapping) and "pixel_values" in inputs, (
            f"it returned {type(inputs).__name__}: the Trainer's model wants a dict with a `pixel_values` entry"
        )
        pixels = inputs["pixel_values"]
        assert isinstance(pixels, torch.Tensor), (
            f"`pixel_values` is a {type(pixels).__name__}: ask the processor for tensors (`return_tensors=...`)"
        )
        size = tuple(processor(images[:1], return_tensors="pt")["pixel_values"].shape[2:])  # after a crop, if any
        assert tuple(pixels.shape[2:]) == size and pixels.shape[:2] == (4, 3), (
            f"your `pixel_values` have shape {tuple(pixels.shape)} for 4 images of different sizes; the model expects "
            f"(4, 3, {size[0]}, {size[1]}): did every image go through the processor (its size and channel order)?"
        )
        assert pixels.dtype == torch.float32, (
            f"`pixel_values` are {pixels.dtype}: the model's weights are float32, and the processor gives float32; "
            "return its tensor as it is"
        )
        assert float(pixels.abs().max()) <= 1.5, (
            f"values from {float(pixels.min()):.1f} to {float(pixels.max()):.1f}: the processor rescales and "
            "normalises; pass the PIL images themselves, not arrays you scaled"
        )
        expected = processor(images, return_tensors="pt")["pixel_values"]
        if not torch.allclose(pixels.float(), expected, atol=1e-3):
            assert float(pixels.min()) < 0 or float(expected.min()) >= 0, (
                f"values from {float(pixels.min()):.2f} to {float(pixels.max()):.2f}, never negative: the images were "
                "rescaled but not normalised by the processor's mean and std (leave `do_normalize` on)"
            )
            raise AssertionError(
                "the values differ from what the processor gives for the same images: call the processor itself "
                "with its own settings (size, rescaling, mean and std), on the PIL images"
            )
        return f"4 images of different sizes became pixel_values {tuple(pixels.shape)}, normalised"

    return check("01.2", run)
