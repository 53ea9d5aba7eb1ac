"""The "Your turn" checks of notebook 02b (surviving a failure) (rules: ``course.exercises.checking``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from course.exercises.checking import NotDone, Verdict, attach_ray, check, learner_error, untouched
from course.exercises.train_runs import (
    RESUME_WORKERS,
    RUN_LIMIT_S,
    WORKER_LIMIT_S,
    Crash,
    Reports,
    fit_within,
    run_watched,
    stopped_finding,
)

RESUME_STEPS, RESUME_CRASH_AFTER = 7, 4  # the check's own run: count to 7; a worker dies after reporting step 4

ASKED = "_asked_for_checkpoint"  # in each report of the check's run: had the worker called ray.train.get_checkpoint?


def _count_checkpoint_requests() -> dict:
    """In this Ray Train worker, note when the learner's function asks for its checkpoint, however it imported
    ``get_checkpoint`` (``ray.train.get_checkpoint`` and ``from ray.train import get_checkpoint`` both end in the
    worker's ``TrainFnUtils.get_checkpoint``). Returns ``{"asked": bool}``; ``None`` for ``asked`` where this Ray has
    no such method (the check then does not judge it)."""
    asked: dict = {"asked": None}
    try:
        from course.internals import get_train_fn_utils  # a Ray Train internal: an entry of course.internals

        utils = type(get_train_fn_utils())
        original = utils.get_checkpoint
    except Exception:  # noqa: BLE001  (another Ray: nothing counted)
        return asked

    def get_checkpoint(self: Any) -> Any:
        asked["asked"] = True
        return original(self)

    asked["asked"] = False
    utils.get_checkpoint = get_checkpoint
    return asked


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
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from course.config import run_name, storage_path
    from course.distributed import torch_config

    def run() -> str:
        if untouched(count_to):
            raise NotDone
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
        restarted_at = after[0]
        return (
            f"one of {RESUME_WORKERS} workers died after step {RESUME_CRASH_AFTER}; Ray Train restarted them and your "
            f"function went on from step {restarted_at - 1} to {RESUME_STEPS}"
        )

    def worth_running() -> bool:
        return (
            not untouched(count_to) and isinstance(failure_config, FailureConfig) and failure_config.max_failures == 1
        )

    return check("02b.1", run, limit_s=RUN_LIMIT_S + 60, ray_first=worth_running)
