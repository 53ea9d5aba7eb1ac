"""Lesson 02b's check (course.exercises.fault_tolerance): the common wrong answers are refused with a message
that teaches, the right ones pass.

The answers a learner who half-understood would write, each refused below:

02b.1 ``count_to(loop_config)`` and ``failure_config``
  - ``failure_config`` left at ``None``, the default ``FailureConfig()`` (no restart), ``max_failures=-1`` or 3, the
    class itself, a whole ``RunConfig``, a number;
  - a counter that never reads ``ray.train.get_checkpoint()`` (it counts from 1 again);
  - a counter that resumes *at* the saved step (that step reported twice);
  - reports without a checkpoint; a metric named otherwise than ``step``; a number of steps written in (10);
  - only rank 0 reports (the other worker waits at ``ray.train.report`` for ever);
  - the step kept in a file of its own on the local disk, or in a variable, and read from there after the restart,
    instead of from the checkpoint Ray Train hands back (works on one machine only);
  - a bug of its own (a typo), a loop that never ends.
  Right: only rank 0 attaches the checkpoint (the others pass ``None``); ``from ray.train import get_checkpoint``.

Every wrong answer one worker can show is judged in Ray Train's local mode, without Ray; only "rank 0 reports" and
the right answer need two workers and a restart (one test, on the cluster).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import ray
import ray.train
import ray.train as train
from exercise_checks import expect, leave_ray, todo
from ray.train import Checkpoint, FailureConfig, get_checkpoint, report

from course.exercises import (
    checking,
    fault_tolerance,
)


def test_resume_refuses_a_failure_config_that_is_missing_or_not_one_restart():
    def unrun(loop_config):  # the FailureConfig is refused first
        pass

    expect(fault_tolerance.check_resume(unrun, None), checking.WRONG, "make it a `FailureConfig`")
    expect(fault_tolerance.check_resume(unrun, FailureConfig(max_failures=0)), checking.WRONG, "exactly one restart")
    expect(fault_tolerance.check_resume(unrun, FailureConfig(max_failures=-1)), checking.WRONG, "would never stop")
    expect(fault_tolerance.check_resume(todo, FailureConfig(max_failures=1)), checking.NOT_DONE)


def test_resume_names_each_half_right_failure_config_before_ray_starts():
    """02b.1: the default FailureConfig, the class itself, a whole RunConfig, more restarts than one; all said
    without a run (and without starting Ray)."""
    import ray
    from ray.train import RunConfig

    def unrun(loop_config):  # the FailureConfig is refused first
        pass

    leave_ray()  # an earlier test's Ray (tests run in one process): this one asks whether the check starts it
    check = fault_tolerance.check_resume
    expect(check(unrun, FailureConfig()), checking.WRONG, "max_failures=0", "the default, allows none")
    expect(check(unrun, FailureConfig), checking.WRONG, "the class `FailureConfig` itself", "max_failures=1")
    whole_run = RunConfig(failure_config=FailureConfig(max_failures=1))
    expect(check(unrun, whole_run), checking.WRONG, "a whole `RunConfig`", "the `FailureConfig` alone")
    expect(check(unrun, FailureConfig(max_failures=3)), checking.WRONG, "exactly one restart", "runs 4 times")
    expect(check(unrun, 1), checking.WRONG, "`failure_config` is 1", "make it a `FailureConfig`")
    assert not ray.is_initialized(), "the check started Ray for a FailureConfig it refuses"


def counter(resume=True, with_checkpoint=True, steps=None):
    """A counter as the lesson writes it: the step in each checkpoint, read back on resume (the switches break it).
    Made inside this function, so that Ray ships it by value to workers that cannot import this test module."""

    def count(loop_config):
        start = 0
        checkpoint = ray.train.get_checkpoint()
        if resume and checkpoint is not None:
            with checkpoint.as_directory() as folder:
                start = int(Path(folder, "step.txt").read_text())
        for step in range(start + 1, (steps or loop_config["steps"]) + 1):
            with tempfile.TemporaryDirectory() as folder:
                Path(folder, "step.txt").write_text(str(step))
                saved = ray.train.Checkpoint.from_directory(folder) if with_checkpoint else None
                ray.train.report({"step": step}, checkpoint=saved)

    return count


def counter_imported_by_name(loop_config):  # the names bound when this module was imported, as a cell's imports are
    start = 0
    checkpoint = get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            start = int(Path(folder, "step.txt").read_text())
    for step in range(start + 1, loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "step.txt").write_text(str(step))
            report({"step": step}, checkpoint=Checkpoint.from_directory(folder))


def counter_imported_as_train(loop_config):
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            start = int(Path(folder, "step.txt").read_text())
    for step in range(start + 1, loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "step.txt").write_text(str(step))
            train.report({"step": step}, checkpoint=train.Checkpoint.from_directory(folder))


@pytest.mark.parametrize("answer", [counter(), counter_imported_by_name, counter_imported_as_train])
def test_resume_passes_local_mode_however_the_answer_imports_ray_train(answer):
    """Local mode judges what one worker shows (the run on workers, only what needs two ranks): a right counter
    passes it, with ``report`` and ``get_checkpoint`` imported by name before the check began, or through
    ``import ray.train as train``."""
    fault_tolerance._judge_resume_locally(answer)  # raises the finding where it sees one


def repeats_the_saved_step(loop_config):  # resumes *at* the checkpoint's step, so that step is reported twice
    start = 1
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            start = int(Path(folder, "step.txt").read_text())
    for step in range(start, loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "step.txt").write_text(str(step))
            ray.train.report({"step": step}, checkpoint=ray.train.Checkpoint.from_directory(folder))


def other_key(loop_config):  # reports {"n": step}: no crash comes, and the check has no `step` to read
    for step in range(1, loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "step.txt").write_text(str(step))
            ray.train.report({"n": step}, checkpoint=ray.train.Checkpoint.from_directory(folder))


def a_typo(loop_config):  # a bug of the learner's own: local mode raises it as it is
    for step in range(1, loop_config["step"] + 1):
        ray.train.report({"step": step})


def never_ends(loop_config):
    while True:
        pass


COUNTED = {"steps": 0}  # what `in_a_variable` remembers between its runs in this process


def in_a_variable(loop_config):  # the step kept in a variable of the process: right in local mode, on one machine
    for step in range(COUNTED["steps"] + 1, loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            ray.train.report({"step": step}, checkpoint=ray.train.Checkpoint.from_directory(folder))
        COUNTED["steps"] = step


RESUME_WRONG = {  # judged in local mode, in this process: no Ray, no cluster
    "counts from 1 again": (counter(resume=False), ["counted from 1 again"]),
    "no checkpoint": (counter(with_checkpoint=False), ["no checkpoint was reported"]),
    "ten steps written in": (counter(steps=10), ["count to the number the loop config"]),
    "resumes at the saved step": (repeats_the_saved_step, ["go on right after it"]),
    "another metric name": (other_key, ["no `step`", "['n']"]),
    "a typo": (a_typo, ["raised KeyError: 'step'", "num_workers=0", "traceback in your cell"]),
    "a loop that never ends": (never_ends, ["still running after 5 s", "loop that never ends"]),
    "the step in a variable": (in_a_variable, ["never called `ray.train.get_checkpoint()`", "another machine"]),
}


@pytest.mark.parametrize("answer, phrases", RESUME_WRONG.values(), ids=RESUME_WRONG.keys())
def test_resume_refuses_in_local_mode_without_starting_ray(answer, phrases):
    """02b.1: what one worker shows (an error, a missing checkpoint, a step lost or repeated on resume) is judged in
    Ray Train's local mode, in this process, before any cluster: the verdict in seconds, and Ray never started."""
    leave_ray()  # an earlier test's Ray (tests run in one process): this one asks whether the check starts it
    COUNTED["steps"] = 0
    expect(fault_tolerance.check_resume(answer, FailureConfig(max_failures=1)), checking.WRONG, *phrases)
    assert not ray.is_initialized(), "the check started Ray for an answer local mode refuses"


def test_resume_refuses_a_step_kept_in_a_file_beside_ray(tmp_path):
    """02b.1: the step read back from a file of the learner's own (no ``get_checkpoint``): right on one machine only."""
    own_file = tmp_path / "count.txt"

    def beside_ray(loop_config):  # the step in a file of its own, written after each report
        start = int(own_file.read_text()) if own_file.exists() else 0
        for step in range(start + 1, loop_config["steps"] + 1):
            with tempfile.TemporaryDirectory() as folder:
                Path(folder, "step.txt").write_text(str(step))
                ray.train.report({"step": step}, checkpoint=ray.train.Checkpoint.from_directory(folder))
            own_file.write_text(str(step))

    expect(
        fault_tolerance.check_resume(beside_ray, FailureConfig(max_failures=1)),
        checking.WRONG,
        "never called `ray.train.get_checkpoint()`",
        "another machine",
    )


@pytest.mark.cluster
def test_resume_runs_what_local_mode_passes_on_two_workers_and_kills_one():
    """02b.1 on Ray Train, for what only two workers show: only rank 0 reports (the other worker waits at the
    barrier for ever), refused; a checkpoint attached by rank 0 alone, with ``get_checkpoint`` imported by name,
    accepted after a real restart. Both pass local mode first."""
    from ray.train import get_checkpoint

    from course.cluster import init_ray

    init_ray()
    one_restart = FailureConfig(max_failures=1)

    count = counter()

    def rank_zero_reports(loop_config):  # "only rank 0 reports": the other worker never reaches the barrier
        if ray.train.get_context().get_world_rank() == 0:
            count(loop_config)

    expect(
        fault_tolerance.check_resume(rank_zero_reports, one_restart),
        checking.WRONG,
        "would have waited forever",
        "Every worker calls `ray.train.report`",
    )

    def rank_zero_checkpoints(loop_config):
        start = 0
        checkpoint = get_checkpoint()
        if checkpoint is not None:
            with checkpoint.as_directory() as folder:
                start = int(Path(folder, "step.txt").read_text())
        rank = ray.train.get_context().get_world_rank()
        for step in range(start + 1, loop_config["steps"] + 1):
            with tempfile.TemporaryDirectory() as folder:
                Path(folder, "step.txt").write_text(str(step))
                saved = ray.train.Checkpoint.from_directory(folder) if rank == 0 else None
                ray.train.report({"step": step}, checkpoint=saved)

    expect(fault_tolerance.check_resume(rank_zero_checkpoints, one_restart), checking.DONE, "went on from step 4")
    leave_ray()


def test_the_ray_train_internal_that_counts_checkpoint_requests_is_still_there():
    """02b.1's check counts the learner's ``get_checkpoint`` calls by wrapping a Ray Train internal (written for Ray
    2.60: ``get_train_fn_utils()`` returns the worker's ``TrainFnUtils``, whose ``get_checkpoint`` every public
    spelling ends in). If an upgrade moves it, the check stops judging that rule: this test says so first."""
    from ray.train.v2._internal.execution import train_fn_utils

    assert callable(train_fn_utils.get_train_fn_utils)
    for utils in (train_fn_utils.DistributedTrainFnUtils, train_fn_utils.LocalTrainFnUtils):
        assert issubclass(utils, train_fn_utils.TrainFnUtils) and "get_checkpoint" in vars(utils)
