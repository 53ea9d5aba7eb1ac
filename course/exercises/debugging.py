"""The "Your turn" checks of notebook 02c (when a distributed run goes wrong) (rules: ``course.exercises.checking``).

Both run the learner's code in Ray Train's local mode (``train_runs.fit_locally``: in this process, in seconds):

- 02c.1 hands the learner's ``fit_failing_fast(trainer, timeout_s)`` real trainers in local mode, whose ``fit`` notes
  the collective timeout it starts with; what Ray Train does with the setting (a hang turned into an error on two
  workers) is what the lesson's section 4 shows.
- 02c.2 runs the learner's elastic function as each worker of an elastic run would run it, one at a time: as rank 1 of
  2, as rank 0 of 2 until its node leaves, then as rank 0 of 1, restarted from the last checkpoint
  (``course.internals.pretend_local_world``). The real resize on a cluster is the lesson's section 6.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from course.exercises.checking import NotDone, Verdict, attempt, check, untouched
from course.exercises.train_runs import Kept, LocalLate, Reports, fit_locally, raised_locally, run_watched

TIMEOUT = "RAY_TRAIN_COLLECTIVE_TIMEOUT_S"
WARN_INTERVAL = "RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S"
TIMEOUT_CHECK_LIMIT_S = 30  # 02c.1: three local-mode runs of a function that reports once

# 02c.2: the check's own elastic run, on numbers the lesson does not use: 7 steps of a global batch of 48 rows; the node
# of rank 1 leaves after step 3, and the run goes on as one worker
ELASTIC_STEPS, ELASTIC_BATCH, ELASTIC_LEAVES_AFTER = 7, 48, 3
ELASTIC_LIMIT_S = 30  # the three local-mode runs together
LOCAL_RUN_LIMIT_S = 8  # each of them (7 steps of counting take well under a second)


# 02c.1 ---------------------------------------------------------------------------------------------------------------


def _reports_once(loop_config: dict) -> None:
    import ray.train

    ray.train.report({"answer": loop_config["answer"]})


def _raises(loop_config: dict) -> None:
    raise ValueError("the check's run failed on purpose")


def _watched_trainer(train_func: Callable[[dict], None], answer: int, seen: dict) -> Any:
    """A TorchTrainer in local mode whose ``fit`` notes in ``seen`` the collective settings it starts with."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    trainer = TorchTrainer(
        train_func,
        train_loop_config={"answer": answer},
        scaling_config=ScalingConfig(num_workers=0),
        run_config=RunConfig(name="course-check-timeout"),
    )
    fit = trainer.fit

    def noted_fit() -> Any:
        seen.setdefault("fits", []).append({name: os.environ.get(name) for name in (TIMEOUT, WARN_INTERVAL)})
        return fit()

    trainer.fit = noted_fit
    return trainer


def _judge_fit(seen: dict, timeout_s: int, before: str | None, after: str | None, case: str) -> None:
    """02c.1's findings on one call of the learner's function: the settings ``fit`` started with, and what the
    setting was ``before`` and ``after`` the call."""
    fits = seen.get("fits", [])
    assert fits, (
        f"{case}, your function never called `trainer.fit()`: it must run the trainer it is given, with the timeout "
        "set, and return what `fit()` returns"
    )
    assert len(fits) == 1, f"{case}, your function called `trainer.fit()` {len(fits)} times: once is the run"
    at_start = fits[0][TIMEOUT]
    if at_start is None:
        also = (
            f" (`{WARN_INTERVAL}` was set: it only warns; the timeout is `{TIMEOUT}`)" if fits[0][WARN_INTERVAL] else ""
        )
        raise AssertionError(
            f"{case}, `{TIMEOUT}` was not set when `trainer.fit()` started{also}. Ray Train's controller and "
            "workers take it from this process once, as `fit()` starts them: set `os.environ[...]` before you call "
            "`fit()`, not after it, nor inside the training function"
        )
    try:
        value = float(at_start)
    except ValueError:
        raise AssertionError(
            f"{case}, `{TIMEOUT}` was {at_start!r} when `fit()` started: Ray Train reads a number of seconds there, "
            "`str(timeout_s)`"
        ) from None
    assert value == timeout_s, (
        f"{case}, `fit()` started with `{TIMEOUT}={at_start}`: "
        "use the `timeout_s` your function is given, not a number of your own"
    )
    assert after == before, (
        f"{case}, `{TIMEOUT}` was {'unset' if before is None else repr(before)} before your function and "
        f"{'unset' if after is None else repr(after)} after it: every later run of this kernel would "
        + ("keep your timeout" if after is not None else "lose the setting it had")
        + ". Put back what was there when the run ends, also when `fit()` raises (`try: ... finally: ...`): "
        "`os.environ.pop(...)` where nothing was set, the old value where one was"
    )


def check_timeout(fit_failing_fast: Callable[[Any, int], Any]) -> Verdict:
    """02c.1: ``fit_failing_fast(trainer, timeout_s)`` runs ``trainer.fit()`` with Ray Train's collective timeout set
    to ``timeout_s``, returns its result, and puts the setting back as it was, also when ``fit()`` raises."""

    def run() -> str:
        if untouched(fit_failing_fast):
            raise NotDone
        import logging

        kept = os.environ.get(TIMEOUT)
        train = logging.getLogger("ray.train")  # local mode's INFO lines: the check's own runs say nothing
        level = train.level
        train.setLevel(logging.WARNING)
        try:
            # a run that ends well, with the setting unset before
            os.environ.pop(TIMEOUT, None)
            seen: dict = {}
            result = attempt(fit_failing_fast, _watched_trainer(_reports_once, 41, seen), 7)
            _judge_fit(seen, 7, None, os.environ.get(TIMEOUT), "when the check asked for 7 s")
            returned = getattr(result, "metrics", None) or {}
            assert returned.get("answer") == 41, (
                f"your function returned {result!r}, not the `Result` that `trainer.fit()` returned: return it, as "
                "`fit()` would"
            )
            # a run that fails, with a setting of the learner's own before
            os.environ[TIMEOUT] = "300"
            seen = {}
            try:
                fit_failing_fast(_watched_trainer(_raises, 0, seen), 9)
            except NotImplementedError:
                raise NotDone from None
            except Exception:  # noqa: BLE001  (the run's failure, passed on: the check looks at the setting)
                pass
            _judge_fit(seen, 9, "300", os.environ.get(TIMEOUT), "when the check asked for 9 s and the run failed")
        finally:
            train.setLevel(level)
            if kept is None:
                os.environ.pop(TIMEOUT, None)
            else:
                os.environ[TIMEOUT] = kept
        return (
            f"`fit()` started with `{TIMEOUT}` at the seconds asked for (7, then 9), and the setting was put back "
            "after each run, also after one that failed: the next hang of a run you start this way ends as an error"
        )

    return check("02c.1", run, limit_s=TIMEOUT_CHECK_LIMIT_S)


# 02c.2 ---------------------------------------------------------------------------------------------------------------


class _NodeLeft(BaseException):
    """The stand-in for the node that leaves, in local mode: raised in the report after ``ELASTIC_LEAVES_AFTER``,
    before it reaches Ray Train; a BaseException, so that the learner's ``except Exception`` lets it through."""


def _as_worker(learner: Callable[[dict], None], reports: Reports, kept: Kept, world: tuple[int, int], name: str):
    """The learner's function as one worker of the check's elastic run (``world``: its world size and rank), watched
    (``run_watched``: each report noted under ``name``, each checkpoint kept); the ``"leaves"`` worker stops after
    step ``ELASTIC_LEAVES_AFTER``, the ``"after"`` worker starts from the last checkpoint kept."""

    def train_func(loop_config: dict) -> None:
        from course.internals import pretend_local_world, resume_local_run

        if name == "after" and kept.kept:
            resume_local_run(kept.kept[-1])
        undo = pretend_local_world(*world)

        def leave_after(metrics: dict) -> None:
            if name == "leaves" and metrics.get("step") == ELASTIC_LEAVES_AFTER + 1:
                raise _NodeLeft

        try:
            run_watched(learner, loop_config, reports, name, before_report=leave_after, kept=kept)
        except _NodeLeft:
            pass
        finally:
            undo()

    return train_func


def _calls(reports: Reports, name: str) -> list[dict]:
    """The reports of the check's worker ``name`` (``run_watched`` names it ``"<name>/<rank>"``)."""
    return [call for worker, calls in reports.calls.items() if worker.split("/")[0] == name for call in calls]


def check_elastic(elastic_count: Callable[[dict], None]) -> Verdict:
    """02c.2: ``elastic_count(loop_config)`` counts ``loop_config["steps"]`` steps of a global batch of
    ``loop_config["global_batch"]`` rows, each worker taking its share (``global_batch // world_size``) and reporting
    ``{"step": ..., "rows": ...}`` every step, rank 0 with a checkpoint; after a resize it reads the world size again
    and goes on after the checkpoint's step."""

    def run() -> str:
        if untouched(elastic_count):
            raise NotDone
        reports, kept = Reports(), Kept()
        loop_config = {"steps": ELASTIC_STEPS, "global_batch": ELASTIC_BATCH}
        runs = (("rank1", (2, 1)), ("leaves", (2, 0)), ("after", (1, 0)))
        try:
            for name, world in runs:
                try:
                    fit_locally(
                        _as_worker(elastic_count, reports, kept, world, name), loop_config, limit_s=LOCAL_RUN_LIMIT_S
                    )
                except LocalLate:
                    raise
                except Exception as error:  # the learner's own error, as it is (local mode does not wrap it)
                    when = {"rank1": " as rank 1 of 2", "leaves": "", "after": " after the resize to 1 worker"}[name]
                    raise raised_locally(error, when) from None
            return _judge_elastic(reports, kept)
        finally:
            kept.close()

    return check("02c.2", run, limit_s=ELASTIC_LIMIT_S)


def _judge_elastic(reports: Reports, kept: Kept) -> str:
    """02c.2's findings on the three workers' reports: raises the first, or returns the ✓ message."""
    half, whole = ELASTIC_BATCH // 2, ELASTIC_BATCH
    rank1, before, after = (_calls(reports, name) for name in ("rank1", "leaves", "after"))
    assert before, (
        "as rank 0 of 2 your function reported nothing: call `ray.train.report({'step': step, 'rows': rows}, "
        "checkpoint=...)` once per step"
    )
    assert rank1, (
        "as rank 1 of 2 your function reported nothing: `ray.train.report` waits until every worker has called it, "
        "so rank 0 would wait forever (the hang of section 4). Every rank reports every step; only rank 0 attaches "
        "a checkpoint"
    )
    assert len(rank1) == ELASTIC_STEPS, (
        f"as rank 1 of 2 your function reported {len(rank1)} times in a run of {ELASTIC_STEPS} steps: every rank "
        "reports once per step, or the others wait for it at `ray.train.report`"
    )
    steps = [m.get("step") for m in kept.metrics]
    assert kept.metrics, (
        "rank 0 attached no checkpoint: after the node left, the run had nothing to go on from. Attach "
        "`ray.train.Checkpoint.from_directory(folder)`, with the step saved in it, to rank 0's report each step"
    )
    assert all("rows" in m and "step" in m for m in kept.metrics), (
        f"your reports hold {sorted(set().union(*kept.metrics) - {'attempt'})}: report `step` and `rows` each "
        "step; the check reads them by those names"
    )
    rows_before = {m["rows"] for m in kept.metrics if m.get("attempt") == "leaves"}
    rows_after = {m["rows"] for m in kept.metrics if m.get("attempt") == "after"}
    assert rows_before == {half}, (
        f"with 2 workers rank 0 took {sorted(rows_before)} rows a step, but the global batch was {whole}: each worker "
        f"takes its share, `loop_config['global_batch'] // world_size` ({half} here), with the world size from "
        "`ray.train.get_context().get_world_size()`"
    )
    resumed = [m["step"] for m in kept.metrics if m.get("attempt") == "after"]
    assert resumed, (
        f"after the resize to 1 worker your function reported no step (the steps before: {steps}): it must go on "
        f"to `loop_config['steps']` ({ELASTIC_STEPS} here)"
    )
    assert rows_after == {whole}, (
        f"after the resize to 1 worker it took {sorted(rows_after)} rows a step, so each step trained on fewer rows "
        f"than the global batch of {whole}: read the world size each time your function starts (Ray Train starts "
        "it again after every resize) and take `global_batch // world_size` rows"
    )
    assert resumed[0] != 1, (
        f"after the resize your function counted from step 1 again, though the last checkpoint held step "
        f"{ELASTIC_LEAVES_AFTER}: go on after the step saved in `ray.train.get_checkpoint()` when it is not None"
    )
    assert resumed == list(range(ELASTIC_LEAVES_AFTER + 1, ELASTIC_STEPS + 1)), (
        f"the last checkpoint before the node left held step {ELASTIC_LEAVES_AFTER}; after the resize your function "
        f"reported steps {resumed}: go on with the step after the checkpoint's, one at a time, up to "
        f"`loop_config['steps']` ({ELASTIC_STEPS} here)"
    )
    return (
        f"as 2 workers each took {half} of the {whole} rows a step; after the node left after step "
        f"{ELASTIC_LEAVES_AFTER}, one worker went on from step {resumed[0]} to {ELASTIC_STEPS} with all {whole}; "
        "rank 1 reported every step too"
    )
