"""The "Your turn" checks of notebook 02b (surviving a failure) (rules: ``course.exercises.checking``).

02b.1 runs the learner's function twice in Ray Train's local mode first (``train_runs.fit_locally``: in seconds, in
this process): once until a stand-in crash after step 4, once resumed from the last checkpoint kept. Whatever that
shows wrong is the verdict. Only an answer right there goes on to the run on two workers whose last one is killed,
which shows what local mode cannot: every rank reporting, and Ray Train's restart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from course.exercises.checking import NotDone, Verdict, attach_ray, check, learner_error, untouched
from course.exercises.train_runs import (
    RESUME_WORKERS,
    RUN_LIMIT_S,
    WORKER_LIMIT_S,
    Crash,
    Kept,
    LocalLate,
    Reports,
    fit_locally,
    fit_within,
    raised_locally,
    run_watched,
    stopped_finding,
)

RESUME_STEPS, RESUME_CRASH_AFTER = 7, 4  # the check's own run: count to 7; a worker dies after reporting step 4

LOCAL_COUNT_LIMIT_S = 5  # each local-mode attempt (7 steps of counting take about 0.1 s on 2 cores)

ASKED = "_asked_for_checkpoint"  # in each report of the check's run: had the worker called ray.train.get_checkpoint?


def _count_checkpoint_requests() -> dict:
    """In this Ray Train worker, note when the learner's function asks for its checkpoint, however it imported
    ``get_checkpoint`` (``ray.train.get_checkpoint`` and ``from ray.train import get_checkpoint`` both end in the
    worker's ``TrainFnUtils.get_checkpoint``). Returns ``{"asked": bool, "undo": callable}``; ``None`` for ``asked``
    where this Ray has no such method (the check then does not judge it). In local mode the process is the
    learner's own: call ``undo()`` when the function ends."""
    asked: dict = {"asked": None, "undo": lambda: None}
    try:
        from course.internals import get_train_fn_utils  # a Ray Train internal: an entry of course.internals

        utils = type(get_train_fn_utils())
        original = utils.get_checkpoint
    except Exception:  # noqa: BLE001  (another Ray: nothing counted)
        return asked

    def get_checkpoint(self: Any) -> Any:
        asked["asked"] = True
        return original(self)

    def undo() -> None:
        utils.get_checkpoint = original

    asked["asked"], asked["undo"] = False, undo
    utils.get_checkpoint = get_checkpoint
    return asked


class _Crash(BaseException):
    """The stand-in for a lost worker in local mode: raised in the report of the step after ``RESUME_CRASH_AFTER``,
    before it reaches Ray Train; a BaseException, so that the learner's ``except Exception`` lets it through."""


def _counted_locally(count_to: Callable[[dict], None], reports: Reports, kept: Kept, attempt: int) -> Callable:
    """``count_to`` for local mode, watched (``run_watched``, its checkpoints kept): attempt 1 stops at the report of
    the step after ``RESUME_CRASH_AFTER``, as the killed worker does; attempt 2 starts from the last checkpoint
    kept, as Ray Train's restart does."""

    def train_func(loop_config: dict) -> None:
        from course.internals import resume_local_run

        if attempt == 2 and kept.kept:
            resume_local_run(kept.kept[-1])
        asked = _count_checkpoint_requests()

        def die_before(metrics: dict) -> None:
            if asked["asked"] is not None:
                metrics[ASKED] = asked["asked"]
            if attempt == 1 and metrics.get("step") == RESUME_CRASH_AFTER + 1:
                raise _Crash

        try:
            run_watched(count_to, loop_config, reports, attempt, before_report=die_before, kept=kept)
        except _Crash:
            pass
        finally:
            asked["undo"]()

    return train_func


def _judge_resume_locally(count_to: Callable[[dict], None]) -> None:
    """02b.1 in local mode, in seconds: the two attempts (:func:`_counted_locally`), judged as the run on workers is
    (:func:`_judge_resume`). Raises the finding; returns when local mode sees nothing wrong."""
    reports, kept = Reports(), Kept()
    try:
        for attempt in (1, 2):
            try:
                fit_locally(
                    _counted_locally(count_to, reports, kept, attempt),
                    {"steps": RESUME_STEPS},
                    limit_s=LOCAL_COUNT_LIMIT_S,
                )
            except LocalLate:
                raise
            except Exception as error:  # the learner's own error, as it is (local mode does not wrap it)
                raise raised_locally(error, " when it resumed from its checkpoint" if attempt == 2 else "") from None
        _judge_resume(kept.result())
    finally:
        kept.close()


def _dies_once(count_to: Callable[[dict], None], crash_after: int, crash: Any, reports: Any) -> Callable[[dict], None]:
    """``count_to`` as a Ray Train function, watched (``run_watched``), whose last worker dies once (the ``Crash``
    actor), after ``crash_after``.

    The worker is killed as the next step is about to be reported, a moment after the last report
    reached Ray Train: as a lost machine would be, between two checkpoints.
    """

    def train_func(loop_config: dict) -> None:
        import os
        import signal
        import time

        import ray
        import ray.train

        attempt = 2 if ray.get(crash.happened.remote()) else 1
        context = ray.train.get_context()
        last = context.get_world_rank() == context.get_world_size() - 1

        asked = _count_checkpoint_requests()

        def die_before(metrics: dict) -> None:
            if asked["asked"] is not None:
                metrics[ASKED] = asked["asked"]  # reported with the step (see run_watched)
            if last and metrics.get("step") == crash_after + 1 and attempt == 1 and ray.get(crash.now.remote()):
                time.sleep(1.0)  # Ray Train collects the previous report
                os.kill(os.getpid(), signal.SIGKILL)

        run_watched(count_to, loop_config, reports, attempt, before_report=die_before)

    return train_func


def check_resume(count_to: Callable[[dict], None], failure_config: Any) -> Verdict:
    """02b.1: ``count_to`` reports steps with checkpoints and resumes; ``failure_config`` allows a restart. The check
    runs it on 2 workers and kills the last one once."""
    import ray
    import ray.train
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from course.distributed import torch_config
    from course.storage import run_name, storage_path

    def run() -> str:  # after locally(): an untouched function or a refused FailureConfig never gets here
        attach_ray()
        crash = ray.remote(num_cpus=0)(Crash).remote()
        reports = ray.remote(num_cpus=0)(Reports).remote()
        trainer = TorchTrainer(
            _dies_once(count_to, RESUME_CRASH_AFTER, crash, reports),
            train_loop_config={"steps": RESUME_STEPS},
            scaling_config=ScalingConfig(num_workers=RESUME_WORKERS),
            torch_config=torch_config(),
            run_config=RunConfig(
                name=run_name("02b-exercise-count"),
                storage_path=storage_path(),
                failure_config=failure_config,
                logging_config=ray.train.LoggingConfig(log_level="ERROR"),
            ),
        )
        try:
            result = fit_within(trainer)
        except ray.train.TrainingFailedError as error:
            stopped = ray.get(reports.state.remote())["stopped"]
            if stopped:
                raise AssertionError(stopped_finding(stopped, WORKER_LIMIT_S)) from None
            raise AssertionError(
                f"the run failed: {learner_error(error)}. The worker dies only once: look for the error in your "
                "function"
            ) from None
        finally:
            ray.kill(crash)
            ray.kill(reports)
        after = _judge_resume(result)
        restarted_at = after[0]
        return (
            f"one of {RESUME_WORKERS} workers died after step {RESUME_CRASH_AFTER}; Ray Train restarted them and your "
            f"function went on from step {restarted_at - 1} to {RESUME_STEPS}"
        )

    passed = {"locally": False}

    def locally() -> None:  # the failure config, then Ray Train's local mode: in seconds, no Ray
        if untouched(count_to):
            raise NotDone
        _refuse_failure_config(failure_config)
        _judge_resume_locally(count_to)
        passed["locally"] = True

    return check("02b.1", run, limit_s=RUN_LIMIT_S + 60, ray_first=lambda: passed["locally"], locally=locally)


def _refuse_failure_config(failure_config: Any) -> None:
    """02b.1's findings on ``failure_config``, before anything runs."""
    from ray.train import FailureConfig, RunConfig

    assert failure_config is not FailureConfig, (
        "`failure_config` is the class `FailureConfig` itself: make one, `FailureConfig(max_failures=1)`"
    )
    assert not isinstance(failure_config, RunConfig), (
        "`failure_config` is a whole `RunConfig`: the check builds the run's `RunConfig` itself and passes it "
        "your `failure_config`; give the `FailureConfig` alone, `FailureConfig(max_failures=1)`"
    )
    assert isinstance(failure_config, FailureConfig), (
        f"`failure_config` is {failure_config!r}: make it a `FailureConfig`, with the number of restarts allowed"
    )
    failures = failure_config.max_failures
    assert failures == 1, (
        f"`max_failures={failures}`: the exercise allows exactly one restart. "
        + (
            "-1 restarts without end: a job that fails every time would never stop. "
            if failures < 0
            else "0, the default, allows none: the first crash ends the run. "
            if failures == 0
            else f"With {failures}, a function that fails every time runs {failures + 1} times before it stops. "
        )
        + "Set `FailureConfig(max_failures=1)`"
    )


def _judge_resume(result: Any) -> list[int]:
    """02b.1's findings on a run's result (its last checkpoint, the metrics reported with each checkpoint, each with
    its ``attempt``): raises the first, or returns the steps reported after the restart."""
    assert result.checkpoint is not None, (
        "no checkpoint was reported: pass `checkpoint=ray.train.Checkpoint.from_directory(folder)` to "
        "`ray.train.report`, or a restart has nothing to go on from"
    )
    reports = result.metrics_dataframe
    keys = sorted(set(reports.columns) - {"attempt", ASKED}) if reports is not None else []
    assert "step" in keys, (
        f"your reports hold {keys}, no `step`: report each step as `ray.train.report({{'step': step}}, "
        "checkpoint=...)`; the check reads it by that name"
    )
    before, after = (reports.loc[reports["attempt"] == n, "step"].astype(int).tolist() for n in (1, 2))
    assert before, (
        f"no checkpoint was reported before the worker died after step {RESUME_CRASH_AFTER}: attach one to every "
        "step's report, so that a restart goes on from the last step"
    )
    assert after, (
        f"a worker was to die after step {RESUME_CRASH_AFTER}, but the steps reported were {before}, with no "
        "restart: call `ray.train.report(...)` once per step, as the lesson does"
    )
    assert after[0] != 1, (
        f"after the restart your function counted from 1 again (steps reported before the crash: {before}, "
        f"after: {after}): start after the step saved in `ray.train.get_checkpoint()` when it is not None"
    )
    assert after[0] == before[-1] + 1, (
        f"the last checkpoint before the crash was step {before[-1]}, but after the restart your function went "
        f"on with step {after[0]}: save the step in each checkpoint and go on right after it"
    )
    assert after[-1] == RESUME_STEPS, (
        f"the last step reported is {after[-1]}, but `loop_config['steps']` was {RESUME_STEPS}: count to the "
        "number the loop config gives"
    )
    assert after == list(range(after[0], RESUME_STEPS + 1)), (
        f"after the restart the steps were {after}: report each step once, one after another"
    )
    if ASKED in reports:
        asked = reports.loc[reports["attempt"] == 2, ASKED].dropna().astype(bool)
        assert asked.empty or asked.any(), (
            f"after the restart your function went on from step {after[0]}, but it never called "
            "`ray.train.get_checkpoint()`: where did it find the step? A file of its own on this machine's disk, "
            "or a variable, is not there when the restarted worker runs on another machine; the checkpoint Ray "
            "Train hands to every worker is. Read the step from `ray.train.get_checkpoint()`"
        )
    return after
