"""Resuming a Hugging Face fine-tune from a checkpoint, as notebook 02b's training function does: ``from_pretrained``
for the weights, then ``train(resume_from_checkpoint=...)`` for the optimizer, the schedule and the step count. Public
APIs only; the second test says why the first call is needed."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import Trainer, TrainingArguments

from course.build import STANDIN_VIT_CONFIG, standin_vit

STEPS = 2  # the run that writes the checkpoint: two steps, a checkpoint after each


class Images(torch.utils.data.Dataset):
    """Eight random images of the stand-in ViT's size, with labels: enough for a step or two."""

    def __init__(self) -> None:
        size = STANDIN_VIT_CONFIG["image_size"]
        generator = torch.Generator().manual_seed(0)
        self.pixels = torch.randn(8, 3, size, size, generator=generator)
        self.labels = torch.randint(0, 2, (8,), generator=generator)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict:
        return {"pixel_values": self.pixels[index], "labels": self.labels[index]}


def arguments(folder: Path) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(folder),
        max_steps=STEPS,
        save_steps=1,
        per_device_train_batch_size=4,
        use_cpu=True,
        report_to=[],
        disable_tqdm=True,
    )


def weights_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def a_run(folder: Path) -> tuple[torch.nn.Module, str]:
    """A model trained for STEPS steps, and the folder of its last checkpoint (weights, optimizer, schedule, step)."""
    torch.manual_seed(1)
    model = standin_vit(["dog", "fish"])
    Trainer(model=model, args=arguments(folder), train_dataset=Images()).train()
    return model, str(folder / f"checkpoint-{STEPS}")


def a_resume(folder: Path, checkpoint: str, weights_first: bool) -> torch.nn.Module:
    """A fresh model (other random weights), resumed from ``checkpoint``: the run has no step left to take, so what
    the model holds after ``train`` is what the resume loaded."""
    torch.manual_seed(2)
    model = standin_vit(["dog", "fish"])
    if weights_first:  # notebook 02b's line: the checkpoint's weights, by from_pretrained
        model.load_state_dict(type(model).from_pretrained(checkpoint).state_dict())
    trainer = Trainer(model=model, args=arguments(folder / "resumed"), train_dataset=Images())
    trainer.train(resume_from_checkpoint=checkpoint)
    assert trainer.state.global_step == STEPS, "the resume restores the step count"
    return model


def test_the_lessons_resume_holds_the_checkpoints_weights(tmp_path):
    trained, checkpoint = a_run(tmp_path)
    assert weights_equal(a_resume(tmp_path, checkpoint, weights_first=True), trained)


def test_the_trainers_resume_alone_keeps_the_weights_it_had_which_is_why_the_lesson_loads_them_first(tmp_path):
    """transformers 5 saves ViT's weights under other names than it uses in memory; only ``from_pretrained`` converts
    them. If this fails, the Trainer's resume loads them itself, and 02b's ``from_pretrained`` line can go."""
    trained, checkpoint = a_run(tmp_path)
    assert not weights_equal(a_resume(tmp_path, checkpoint, weights_first=False), trained)
