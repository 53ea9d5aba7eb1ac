"""Lesson 02's checks (course.exercises.ray_train_finetune): the common wrong answers are refused with a message
that teaches, the right ones pass.

The answers a learner who half-understood would write, each refused below:

02.1 ``best_evaluation(history)``
  - the last row (``iloc[-1]``), or the row with the lowest ``eval_loss``;
  - numbers written in after looking at the lesson's history (``(200, 0.91)``);
  - a fixed row, found by looking: ``history.iloc[3]``, ``history.loc[3]``, ``history.iloc[-3]`` (accepted before:
    the second history had its best at the same position);
  - a position read as a label (``h["step"][h["eval_accuracy"].argmax()]``) or a label as a position
    (``h["step"].iloc[h["eval_accuracy"].idxmax()]``);
  - the epoch for the step, the pair swapped, the step of one row with the accuracy of another, ``None``.
02.2 ``scaling_for(num_workers, global_batch_size, resources)``
  - the global batch for every worker, or a float (``/``) for the batch;
  - a GPU always, never, whenever the ``GPU`` key is there (``GPU: 0.0``), or whenever there is any GPU (4 workers,
    2 GPUs: never placed);
  - GPUs decided from this machine (``torch.cuda.is_available()``) instead of ``resources``;
  - the lesson's numbers (4 workers) instead of the arguments, ``num_workers`` left at its default (1);
  - all of the cluster's CPUs for every worker (``resources_per_worker={"CPU": resources["CPU"]}``: never placed;
    accepted before).
"""

from __future__ import annotations

from exercise_checks import expect, todo
from ray.train import ScalingConfig

from course.exercises import (
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
    a label, the lowest accuracy for the highest; other right answers."""
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
    # the position itself returned as the step
    position_as_step = lambda h: (int(h["eval_accuracy"].to_numpy().argmax()), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(check(position_as_step), checking.WRONG, "not that row's step (200)", "the row's position in the table")
    # a step before the best beside the right accuracy: the general finding, not the position's
    step_before = lambda h: (int(h.loc[h["eval_accuracy"].idxmax(), "step"]) - 50, float(h["eval_accuracy"].max()))  # noqa: E731
    expect(check(step_before), checking.WRONG, "not the row with the highest `eval_accuracy`")
    # the minimum for the maximum: what a loss would want, not an accuracy
    lowest = lambda h: (int(h.loc[h["eval_accuracy"].idxmin(), "step"]), float(h["eval_accuracy"].min()))  # noqa: E731
    expect(check(lowest), checking.WRONG, "*lowest* `eval_accuracy`", "`idxmax()`")
    first_sorted = lambda h: tuple(h.sort_values("eval_accuracy").iloc[0][["step", "eval_accuracy"]])  # noqa: E731
    expect(check(first_sorted), checking.WRONG, "*lowest*", "ascending=False")

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


def test_best_evaluation_refuses_a_fixed_row_found_by_looking():
    """02.1: a row picked by looking at the lesson's history passed when the second history had its best at the same
    place; the second history now has it elsewhere, and each fixed row gets a verdict that says so."""
    check = ray_train_finetune.check_best_evaluation
    for fixed in (
        lambda h: (int(h["step"].iloc[3]), float(h["eval_accuracy"].iloc[3])),
        lambda h: (int(h.loc[3, "step"]), float(h.loc[3, "eval_accuracy"])),
        lambda h: (int(h["step"].iloc[-3]), float(h["eval_accuracy"].iloc[-3])),
    ):
        expect(check(fixed), checking.WRONG, "reads a fixed row", "wherever that row is")
    # the step of the best row, the accuracy of the last one
    mixed_rows = lambda h: (int(h.loc[h["eval_accuracy"].idxmax(), "step"]), float(h["eval_accuracy"].iloc[-1]))  # noqa: E731
    expect(check(mixed_rows), checking.WRONG, "the step is right (200)", "read both from the same row")

    def step_found_accuracy_of_another(history):
        best = history["eval_accuracy"].idxmax()
        return int(history.loc[best, "step"]), float(history["eval_accuracy"].iloc[3])

    expect(check(step_found_accuracy_of_another), checking.WRONG, "the step is right", "read both from the same row")

    def nlargest(history):
        best = history.nlargest(1, "eval_accuracy")
        return int(best["step"].iloc[0]), float(best["eval_accuracy"].iloc[0])

    def by_mask(history):
        best = history[history["eval_accuracy"] == history["eval_accuracy"].max()].iloc[0]
        return best["step"], best["eval_accuracy"]

    for right in (nlargest, by_mask):
        expect(check(right), checking.DONE, "step 200, accuracy 0.91")


def test_best_evaluation_names_a_label_and_a_position_mixed_up_on_the_second_history():
    """02.1: on the first history labels and positions agree; the second one (rows labelled 2 to 9) tells them
    apart, and says which of the two was mixed up."""
    check = ray_train_finetune.check_best_evaluation
    label_as_position = lambda h: (int(h["step"].iloc[h["eval_accuracy"].idxmax()]), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(check(label_as_position), checking.WRONG, "*position* 6", "`idxmax()` its *label*")
    position_as_label = lambda h: (int(h.loc[h["eval_accuracy"].argmax(), "step"]), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(check(position_as_label), checking.WRONG, "*labelled* 4", "`argmax()` gives a row's *position*")


def test_scaling_refuses_workers_that_cannot_be_placed_and_gpus_read_from_elsewhere():
    """02.2: every worker given all of the cluster's CPUs (accepted before: the check looked at GPUs only), GPUs read
    from this machine instead of ``resources``, ``num_workers`` left at its default; other right answers."""
    check = ray_train_finetune.check_scaling

    def all_cpus_each(workers, global_batch, resources):  # the check before this one gave it a ✓
        use_gpu = resources.get("GPU", 0) >= workers
        each = {"CPU": resources["CPU"]} | ({"GPU": 1} if use_gpu else {})
        return ScalingConfig(num_workers=workers, use_gpu=use_gpu, resources_per_worker=each), global_batch // workers

    expect(check(all_cpus_each), checking.WRONG, "32 CPU in all", "cannot place the workers")

    def from_this_machine(workers, global_batch, resources):
        import torch

        return ScalingConfig(num_workers=workers, use_gpu=torch.cuda.is_available()), global_batch // workers

    if not __import__("torch").cuda.is_available():
        expect(check(from_this_machine), checking.WRONG, "Decide from the `resources`", "ray.cluster_resources()")

    def default_workers(workers, global_batch, resources):
        return ScalingConfig(use_gpu=resources.get("GPU", 0) >= workers), global_batch // workers

    expect(check(default_workers), checking.WRONG, "asked for 4 workers, the ScalingConfig has 1")

    def two_cpus_each(workers, global_batch, resources):  # 4 x 2 CPUs on 8: they fit
        use_gpu = resources.get("GPU", 0) >= workers
        each = {"GPU": 1} if use_gpu else {"CPU": resources["CPU"] // workers}
        return ScalingConfig(num_workers=workers, use_gpu=use_gpu, resources_per_worker=each), global_batch // workers

    def with_math(workers, global_batch, resources):
        import math

        gpus = int(resources.get("GPU", 0))
        return ScalingConfig(num_workers=workers, use_gpu=gpus >= workers), math.floor(global_batch / workers)

    for right in (two_cpus_each, with_math):
        expect(check(right), checking.DONE)
