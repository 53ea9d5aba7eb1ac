"""02c's checks: the wrong answers a learner writes are refused with a message that teaches; right ones pass. Both
checks run in Ray Train's local mode, in this process: each verdict comes in seconds."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import ray.train
import ray.train as train
from ray.train import Checkpoint, get_checkpoint, get_context, report

from course.exercises import debugging

TIMEOUT = debugging.TIMEOUT


@pytest.fixture(autouse=True)
def no_timeout_set(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(TIMEOUT, raising=False)


# 02c.1 ---------------------------------------------------------------------------------------------------------------


def fit_with_finally(trainer, timeout_s):
    before = os.environ.get(TIMEOUT)
    os.environ[TIMEOUT] = str(timeout_s)
    try:
        return trainer.fit()
    finally:
        if before is None:
            os.environ.pop(TIMEOUT)
        else:
            os.environ[TIMEOUT] = before


def fit_with_a_float_and_mock_style_restore(trainer, timeout_s):
    from unittest import mock

    with mock.patch.dict(os.environ, {TIMEOUT: f"{float(timeout_s)}"}):
        return trainer.fit()


def fit_then_set(trainer, timeout_s):
    result = trainer.fit()
    os.environ[TIMEOUT] = str(timeout_s)
    return result


def fit_with_the_lessons_number(trainer, timeout_s):
    return fit_with_finally(trainer, 12)


def fit_with_the_warning_only(trainer, timeout_s):
    os.environ["RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S"] = str(timeout_s)
    try:
        return trainer.fit()
    finally:
        os.environ.pop("RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S")


def fit_without_restoring(trainer, timeout_s):
    os.environ[TIMEOUT] = str(timeout_s)
    return trainer.fit()


def fit_restoring_only_on_success(trainer, timeout_s):
    os.environ[TIMEOUT] = str(timeout_s)
    result = trainer.fit()
    os.environ.pop(TIMEOUT)
    return result


def fit_popping_what_was_there(trainer, timeout_s):
    os.environ[TIMEOUT] = str(timeout_s)
    try:
        return trainer.fit()
    finally:
        os.environ.pop(TIMEOUT)


def no_fit(trainer, timeout_s):
    os.environ[TIMEOUT] = str(timeout_s)
    os.environ.pop(TIMEOUT)


def fit_not_returned(trainer, timeout_s):
    fit_with_finally(trainer, timeout_s)


@pytest.mark.parametrize("answer", [fit_with_finally, fit_with_a_float_and_mock_style_restore])
def test_check_timeout_accepts_a_setting_made_before_fit_and_put_back(answer):
    verdict = debugging.check_timeout(answer)
    assert verdict.done, verdict.message
    assert TIMEOUT not in os.environ


@pytest.mark.parametrize(
    ("answer", "teaches"),
    [
        (fit_then_set, "not set when `trainer.fit()` started"),
        (fit_with_the_lessons_number, "not a number of your own"),
        (fit_with_the_warning_only, "it only warns"),
        (fit_without_restoring, "keep your timeout"),
        (fit_restoring_only_on_success, "also when `fit()` raises"),
        (fit_popping_what_was_there, "lose the setting it had"),
        (no_fit, "never called `trainer.fit()`"),
        (fit_not_returned, "not the `Result`"),
    ],
)
def test_check_timeout_refuses_with_a_message_that_teaches(answer, teaches):
    verdict = debugging.check_timeout(answer)
    assert not verdict.done
    assert teaches in verdict.message, verdict.message
    assert TIMEOUT not in os.environ  # the check puts back what the learner's code left


def fit_swallowing_the_error(trainer, timeout_s):
    try:
        return fit_with_finally(trainer, timeout_s)
    except Exception:  # the run's error caught: the caller gets None
        return None


def fit_wrapping_the_error(trainer, timeout_s):
    try:
        return fit_with_finally(trainer, timeout_s)
    except Exception as error:
        raise RuntimeError("the run failed fast") from error  # a right answer: the run's error is the cause


def test_check_timeout_accepts_the_runs_error_passed_on_as_a_cause():
    verdict = debugging.check_timeout(fit_wrapping_the_error)
    assert verdict.done, verdict.message


def test_check_timeout_refuses_a_function_that_swallows_the_runs_error():
    verdict = debugging.check_timeout(fit_swallowing_the_error)
    assert not verdict.done
    assert "returned None instead of passing on the run's error" in verdict.message, verdict.message


def test_check_timeout_says_not_done_for_the_untouched_exercise():
    def fit_failing_fast(trainer, timeout_s):
        raise NotImplementedError

    assert debugging.check_timeout(fit_failing_fast).state == "not done yet"


# 02c.2 ---------------------------------------------------------------------------------------------------------------


def _start() -> int:
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return 1
    with checkpoint.as_directory() as folder:
        return int(Path(folder, "step.txt").read_text()) + 1


def _report(step: int, rows: int, rank: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = None
        if rank == 0:
            Path(folder, "step.txt").write_text(str(step))
            checkpoint = Checkpoint.from_directory(folder)
        ray.train.report({"step": step, "rows": rows}, checkpoint=checkpoint)


def elastic_right(loop_config):
    context = ray.train.get_context()
    rows = loop_config["global_batch"] // context.get_world_size()
    for step in range(_start(), loop_config["steps"] + 1):
        _report(step, rows, context.get_world_rank())


def elastic_checkpoint_on_every_rank(loop_config):
    context = ray.train.get_context()
    for step in range(_start(), loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "step.txt").write_text(str(step))
            rows = loop_config["global_batch"] // context.get_world_size()
            ray.train.report({"step": step, "rows": rows}, checkpoint=Checkpoint.from_directory(folder))


def elastic_fixed_batch(loop_config):
    rank = ray.train.get_context().get_world_rank()
    for step in range(_start(), loop_config["steps"] + 1):
        _report(step, loop_config["global_batch"] // 2, rank)  # the lesson's 2 workers, for ever


def elastic_lessons_batch(loop_config):
    context = ray.train.get_context()
    for step in range(_start(), loop_config["steps"] + 1):
        _report(step, 64 // context.get_world_size(), context.get_world_rank())  # the lesson's batch, not the config's


def elastic_from_step_one(loop_config):
    context = ray.train.get_context()
    rows = loop_config["global_batch"] // context.get_world_size()
    for step in range(1, loop_config["steps"] + 1):
        _report(step, rows, context.get_world_rank())


def elastic_repeats_the_checkpoints_step(loop_config):
    context = ray.train.get_context()
    rows = loop_config["global_batch"] // context.get_world_size()
    for step in range(max(_start() - 1, 1), loop_config["steps"] + 1):
        _report(step, rows, context.get_world_rank())


def elastic_reports_on_rank_0_only(loop_config):
    if ray.train.get_context().get_world_rank() == 0:
        elastic_right(loop_config)


def elastic_reports_every_other_step_on_rank_1(loop_config):
    context = ray.train.get_context()
    rows = loop_config["global_batch"] // context.get_world_size()
    for step in range(_start(), loop_config["steps"] + 1):
        if context.get_world_rank() == 0 or step % 2:
            _report(step, rows, context.get_world_rank())


def elastic_no_checkpoint(loop_config):
    context = ray.train.get_context()
    rows = loop_config["global_batch"] // context.get_world_size()
    for step in range(1, loop_config["steps"] + 1):
        ray.train.report({"step": step, "rows": rows})


def elastic_imported_by_name(loop_config):  # the names bound when this module was imported, as a cell's imports are
    context = get_context()
    start, checkpoint = 1, get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            start = int(Path(folder, "step.txt").read_text()) + 1
    rows = loop_config["global_batch"] // context.get_world_size()
    for step in range(start, loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            saved = None
            if context.get_world_rank() == 0:
                Path(folder, "step.txt").write_text(str(step))
                saved = Checkpoint.from_directory(folder)
            report({"step": step, "rows": rows}, checkpoint=saved)


def elastic_imported_as_train(loop_config):
    context = train.get_context()
    rows = loop_config["global_batch"] // context.get_world_size()
    for step in range(_start(), loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            saved = None
            if context.get_world_rank() == 0:
                Path(folder, "step.txt").write_text(str(step))
                saved = train.Checkpoint.from_directory(folder)
            train.report({"step": step, "rows": rows}, checkpoint=saved)


def elastic_checkpoint_every_second_step(loop_config):
    context = ray.train.get_context()
    rows = loop_config["global_batch"] // context.get_world_size()
    for step in range(_start(), loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = None
            if context.get_world_rank() == 0 and step % 2 == 0:  # as section 6 does: every checkpoint_every steps
                Path(folder, "step.txt").write_text(str(step))
                checkpoint = Checkpoint.from_directory(folder)
            ray.train.report({"step": step, "rows": rows}, checkpoint=checkpoint)


def elastic_every_second_step_resumed_one_late(loop_config):
    context = ray.train.get_context()
    rows = loop_config["global_batch"] // context.get_world_size()
    for step in range(_start() + 1 if ray.train.get_checkpoint() else 1, loop_config["steps"] + 1):
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = None
            if context.get_world_rank() == 0 and step % 2 == 0:
                Path(folder, "step.txt").write_text(str(step))
                checkpoint = Checkpoint.from_directory(folder)
            ray.train.report({"step": step, "rows": rows}, checkpoint=checkpoint)


def elastic_resumes_on_rank_0_only(loop_config):
    context = ray.train.get_context()
    rank = context.get_world_rank()
    rows = loop_config["global_batch"] // context.get_world_size()
    start = _start() if rank == 0 else 1  # the mistake: rank 1 never reads the checkpoint
    for step in range(start, loop_config["steps"] + 1):
        _report(step, rows, rank)


@pytest.mark.parametrize(
    "answer",
    [elastic_right, elastic_imported_by_name, elastic_imported_as_train, elastic_checkpoint_every_second_step],
)
def test_check_elastic_accepts_a_count_that_reads_the_world_size_and_resumes(answer):
    verdict = debugging.check_elastic(answer)
    assert verdict.done, verdict.message


@pytest.mark.parametrize(
    ("answer", "teaches"),
    [
        (elastic_fixed_batch, "read the world size each time your function starts"),
        (elastic_lessons_batch, "`loop_config['global_batch'] // world_size`"),
        (elastic_from_step_one, "counted from step 1 again"),
        (elastic_repeats_the_checkpoints_step, "go on with the step after the checkpoint's"),
        (elastic_reports_on_rank_0_only, "as rank 1 of 2 your function reported nothing"),
        (elastic_reports_every_other_step_on_rank_1, "every rank reports once per step"),
        (elastic_no_checkpoint, "rank 0 attached no checkpoint"),
        (elastic_checkpoint_on_every_rank, "rank 1 attached a checkpoint"),
        (elastic_resumes_on_rank_0_only, "read `ray.train.get_checkpoint()` on every rank, not on rank 0 only"),
        # every report is read, not only those with a checkpoint: steps 4 to 6 here, of a checkpoint of step 2
        (elastic_every_second_step_resumed_one_late, "reported steps [4, 5, 6], restarted from a checkpoint of step 2"),
    ],
)
def test_check_elastic_refuses_with_a_message_that_teaches(answer, teaches):
    verdict = debugging.check_elastic(answer)
    assert not verdict.done
    assert teaches in verdict.message, verdict.message


def test_check_elastic_says_not_done_for_the_untouched_exercise():
    def elastic_count(loop_config):
        raise NotImplementedError

    assert debugging.check_elastic(elastic_count).state == "not done yet"
