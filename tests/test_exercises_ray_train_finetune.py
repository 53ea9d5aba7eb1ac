"""Lesson 02's checks (helpers.exercises.ray_train_finetune): the common wrong answers are refused with a message
that teaches, the right one passes."""

from __future__ import annotations

from exercise_checks import expect, results_here, todo  # noqa: F401  (results_here: an autouse fixture)
from ray.train import ScalingConfig

from helpers.exercises import (
    checking,
    ray_train_finetune,
)


def test_best_evaluation():
    expect(
        ray_train_finetune.check_best_evaluation(
            lambda h: (int(h["step"].iloc[-1]), float(h["eval_accuracy"].iloc[-1]))
        ),
        checking.WRONG,
        "you returned the last evaluation",
    )
    expect(
        ray_train_finetune.check_best_evaluation(lambda h: (int(h["step"].iloc[h["eval_loss"].idxmin() + 1]), 0.89)),
        checking.WRONG,
        "not the row with the highest `eval_accuracy`",
    )
    lowest_loss = lambda h: (
        int(h.loc[h["eval_loss"].idxmin(), "step"]),
        float(h.loc[h["eval_loss"].idxmin(), "eval_accuracy"]),
    )  # noqa: E731,E501
    expect(ray_train_finetune.check_best_evaluation(lowest_loss), checking.WRONG, "lowest `eval_loss`", "highest")
    by_position = lambda h: (int(h["step"].iloc[h["eval_accuracy"].idxmax()]), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(ray_train_finetune.check_best_evaluation(by_position), checking.WRONG, "`idxmax()` its *label*", "`.loc`")
    expect(ray_train_finetune.check_best_evaluation(lambda h: 200), checking.WRONG, "return a pair")
    best = lambda h: (int(h.loc[h["eval_accuracy"].idxmax(), "step"]), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(ray_train_finetune.check_best_evaluation(best), checking.DONE)


def test_scaling():
    def same_batch_everywhere(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers), global_batch

    def always_gpu(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu=True), global_batch // workers

    expect(ray_train_finetune.check_scaling(same_batch_everywhere), checking.WRONG, "divided by the number of workers")
    expect(ray_train_finetune.check_scaling(always_gpu), checking.WRONG, "never ask Ray for one it lacks")

    def gpu_key_present(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu="GPU" in resources), global_batch // workers

    expect(ray_train_finetune.check_scaling(gpu_key_present), checking.WRONG, "GPU: 0.0", "no GPU")

    def true_division(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers), global_batch / workers

    expect(ray_train_finetune.check_scaling(true_division), checking.WRONG, "whole number")

    def the_lessons_numbers(workers, global_batch, resources):
        return ScalingConfig(num_workers=4, use_gpu=resources.get("GPU", 0) >= 4), global_batch // 4

    expect(ray_train_finetune.check_scaling(the_lessons_numbers), checking.WRONG, "use the arguments")

    def right(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu=resources.get("GPU", 0) >= workers), global_batch // workers

    expect(ray_train_finetune.check_scaling(right), checking.DONE)


def test_best_evaluation_names_each_half_right_answer():
    """02.1: numbers written in, the epoch for the step, the pair swapped, an empty function, argmax's position read as
    a label; other right answers."""
    check = ray_train_finetune.check_best_evaluation
    expect(check(lambda h: (200, 0.91)), checking.WRONG, "returned (200, 0.91) again", "not numbers written in")
    by_epoch = lambda h: (float(h.loc[h["eval_accuracy"].idxmax(), "epoch"]), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(check(by_epoch), checking.WRONG, "the *epoch*", "`step` column")
    swapped = lambda h: (float(h["eval_accuracy"].max()), int(h.loc[h["eval_accuracy"].idxmax(), "step"]))  # noqa: E731
    expect(check(swapped), checking.WRONG, "swapped", "(step, eval_accuracy)")
    expect(check(lambda h: None), checking.WRONG, "NoneType", "return a pair")
    expect(check(todo), checking.NOT_DONE)
    # a PyTorch user's argmax: a position, read as a label (`[]` on a Series reads labels)
    positions_as_labels = lambda h: (int(h["step"][h["eval_accuracy"].argmax()]), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(check(positions_as_labels), checking.WRONG, "`argmax()` gives a row's *position*", "`.iloc`")

    def sorted_rows(history):
        best = history.sort_values("eval_accuracy").iloc[-1]
        return best["step"], best["eval_accuracy"]  # numpy numbers: still a right answer

    def by_position(history):
        best = history.iloc[history["eval_accuracy"].argmax()]  # argmax is a position: .iloc is right with it
        return int(best["step"]), float(best["eval_accuracy"])

    as_list = lambda h: [int(h.loc[h["eval_accuracy"].idxmax(), "step"]), float(h["eval_accuracy"].max())]  # noqa: E731
    for right in (sorted_rows, by_position, as_list):
        expect(check(right), checking.DONE, "step 200, accuracy 0.91")


def test_scaling_asks_for_gpus_only_when_every_worker_gets_one():
    """02.2: one GPU per worker whenever the cluster has any GPU: 4 workers on 2 GPUs would never start."""

    def any_gpu(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu=resources.get("GPU", 0) > 0), global_batch // workers

    expect(
        ray_train_finetune.check_scaling(any_gpu), checking.WRONG, "need 4 GPUs, and this cluster has 2", "cannot place"
    )

    def shares_the_gpus(workers, global_batch, resources):  # a fraction of a GPU each: they all fit
        gpus = resources.get("GPU", 0)
        if not gpus:
            return ScalingConfig(num_workers=workers), global_batch // workers
        each = {"GPU": min(1, gpus / workers)}
        return ScalingConfig(num_workers=workers, use_gpu=True, resources_per_worker=each), global_batch // workers

    expect(ray_train_finetune.check_scaling(shares_the_gpus), checking.DONE)

    def ignores_the_batch(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu=resources.get("GPU", 0) >= workers), 8

    expect(ray_train_finetune.check_scaling(ignores_the_batch), checking.WRONG, "give 8 per worker")
    expect(ray_train_finetune.check_scaling(todo), checking.NOT_DONE)
