"""Resuming a Hugging Face fine-tune from a checkpoint restores the model's weights (notebook 02b)."""

from __future__ import annotations

import torch
from transformers import Trainer, TrainingArguments

from course.build import standin_vit
from helpers.train import ResumableTrainer


def weights_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def saved_checkpoint(folder) -> tuple[torch.nn.Module, str]:
    torch.manual_seed(1)
    trained = standin_vit(["dog", "fish"])
    args = TrainingArguments(output_dir=str(folder), use_cpu=True, report_to=[])
    Trainer(model=trained, args=args).save_model(str(folder / "checkpoint-100"))  # what a checkpoint holds
    return trained, str(folder / "checkpoint-100")


def fresh_model() -> torch.nn.Module:
    torch.manual_seed(2)
    return standin_vit(["dog", "fish"])


def test_the_course_trainer_resumes_with_the_checkpoints_weights(tmp_path):
    trained, checkpoint = saved_checkpoint(tmp_path)
    model = fresh_model()
    assert not weights_equal(model, trained)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    ResumableTrainer(model=model, args=args)._load_from_checkpoint(checkpoint)
    assert weights_equal(model, trained), "after a resume the model must hold the checkpoint's weights"


def test_the_plain_trainer_does_not_which_is_why_the_course_has_its_own(tmp_path):
    """If this fails, transformers fixed its resume: ResumableTrainer can go."""
    trained, checkpoint = saved_checkpoint(tmp_path)
    model = fresh_model()
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    Trainer(model=model, args=args)._load_from_checkpoint(checkpoint)
    assert not weights_equal(model, trained)
