"""The "Your turn" checks of notebook 02c (when a distributed run goes wrong) (rules: ``course.exercises.checking``).

Both run the learner's code in Ray Train's local mode (``train_runs.fit_locally``: in this process, in seconds):

- 02c.1 hands the learner's ``fit_failing_fast(trainer, timeout_s)`` real trainers in local mode, whose ``fit`` notes
  the collective timeout it starts with; what Ray Train does with the setting (a hang turned into an error on two
  workers) is what the lesson's section 4 shows.
- 02c.2 runs the learner's elastic function as each worker of section 6's elastic run would run it, one at a time
  (``course.internals.pretend_local_world``): rank 1 of 2 and rank 0 of 2 until a node leaves (the worker of rank 0
  of 2 goes on), then rank 0 of 1 restarted from the last checkpoint, then, once the node is back, rank 0 and rank 1
  of 2, both restarted from the same checkpoint. The real resize on a cluster is the lesson's section 6.
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

# 02c.2: the check's own elastic run, on numbers the lesson does not use: 9 steps of a global batch of 48 rows on 2
# workers; a node leaves after step 3 and the run goes on as one worker (rank 0 of 1); the node is back after step 6,
# and the run grows to 2 workers again, both restarted from the last checkpoint
ELASTIC_STEPS, ELASTIC_BATCH, ELASTIC_LEAVES_AFTER, ELASTIC_BACK_AFTER = 9, 48, 3, 6
ELASTIC_LIMIT_S = 30  # the five local-mode runs together
LOCAL_RUN_LIMIT_S = 8  # each of them (9 steps of counting take well under a second)


# 02c.1 ---------------------------------------------------------------------------------------------------------------


def _reports_once(loop_config: dict) -> None:
    import ray.train

    ray.train.report({"answer": loop_config["answer"]})


FAILED_ON_PURPOSE = "the check's run failed on purpose"


def _raises(loop_config: dict) -> None:
    raise ValueError(FAILED_ON_PURPOSE)


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


def _judge_passed_on(raised: BaseException | None, returned: Any, case: str) -> None:
    """02c.1: the run's own error (the check's ``_raises``) reached the caller of the learner's function, as it is or
    as the cause of another error."""
    chain, error = [], raised
    while error is not None and len(chain) < 20:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(FAILED_ON_PURPOSE in str(error) for error in chain), (
        f"{case}, your function "
        + (f"returned {returned!r}" if raised is None else f"raised {type(raised).__name__}: {raised}")
        + " instead of passing on the run's error: a hang cut short by the timeout would end as nothing, and the "
        "caller would not know the run failed. Let `fit()`'s error through (`try: return trainer.fit()` with a "
        "`finally:` that puts the setting back, and no `except`)"
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
            case = "when the check asked for 9 s and the run failed"
            raised: BaseException | None = None
            try:
                returned = fit_failing_fast(_watched_trainer(_raises, 0, seen), 9)
            except NotImplementedError:
                raise NotDone from None
            except Exception as error:  # noqa: BLE001  (the run's failure, passed on: judged below)
                raised = error
            _judge_fit(seen, 9, "300", os.environ.get(TIMEOUT), case)
            _judge_passed_on(raised, returned if raised is None else None, case)
        finally:
            train.setLevel(level)
            if kept is None:
                os.environ.pop(TIMEOUT, None)
            else:
                os.environ[TIMEOUT] = kept
        return (
            f"`fit()` started with `{TIMEOUT}` at the seconds asked for (7, then 9), the failed run's error reached "
            "the caller, and the setting was put back after each run, also after the one that failed: the next hang "
            "of a run you start this way ends as an error"
        )

    return check("02c.1", run, limit_s=TIMEOUT_CHECK_LIMIT_S)


# 02c.2 ---------------------------------------------------------------------------------------------------------------


class _Restart(BaseException):
    """The stand-in for a resize, in local mode: raised in a worker's report after the step its phase ends at (a node
    leaves, or comes back), before it reaches Ray Train; a BaseException, so that the learner's ``except Exception``
    lets it through."""


# The check's elastic run, one worker at a time: (name, (world size, rank), restarted from a checkpoint, last step it
# reports before the group restarts; None: it runs to its end)
PHASES = (
    ("rank 1 of 2", (2, 1), False, None),
    ("rank 0 of 2", (2, 0), False, ELASTIC_LEAVES_AFTER),
    ("alone", (1, 0), True, ELASTIC_BACK_AFTER),
    ("back, rank 0", (2, 0), True, None),
    ("back, rank 1", (2, 1), True, None),
)


def _as_worker(learner: Callable[[dict], None], reports: Reports, kept: Kept, phase: tuple, checkpoint: Any):
    """The learner's function as one worker of the check's elastic run (``phase``: one of :data:`PHASES`), watched
    (``run_watched``: each report noted under the phase's name, each checkpoint kept), restarted from ``checkpoint``
    where the phase restarts."""
    name, world, restarted, last_step = phase

    def train_func(loop_config: dict) -> None:
        from course.internals import pretend_local_world, resume_local_run

        if restarted and checkpoint is not None:
            resume_local_run(checkpoint)
        undo = pretend_local_world(*world)

        def restart_after(metrics: dict) -> None:
            if last_step is not None and isinstance(metrics.get("step"), int) and metrics["step"] > last_step:
                raise _Restart

        try:
            run_watched(learner, loop_config, reports, name, before_report=restart_after, kept=kept)
        except _Restart:
            pass
        finally:
            undo()

    return train_func


def _calls(reports: Reports, name: str, last_step: int | None) -> list[dict]:
    """The reports of the check's worker ``name`` (``run_watched`` names it ``"<name>/<rank>"``) that reached Ray
    Train: up to ``last_step``, where its phase ends in a resize (the report after it is the one the resize stopped)."""
    calls = [call for worker, calls in reports.calls.items() if worker.split("/")[0] == name for call in calls]
    stopped = calls and isinstance(step := _steps(calls[-1:])[0], int) and last_step is not None and step > last_step
    return calls[:-1] if stopped else calls  # without the report the resize stopped (see _as_worker's restart_after)


def check_elastic(elastic_count: Callable[[dict], None]) -> Verdict:
    """02c.2: ``elastic_count(loop_config)`` counts ``loop_config["steps"]`` steps of a global batch of
    ``loop_config["global_batch"]`` rows, each worker taking its share (``global_batch // world_size``) and reporting
    ``{"step": ..., "rows": ...}`` every step, rank 0 alone with a checkpoint; after each resize (a node leaves, it
    comes back) every rank reads the world size again and goes on after the checkpoint's step."""

    def run() -> str:
        if untouched(elastic_count):
            raise NotDone
        reports, kept = Reports(), Kept()
        loop_config = {"steps": ELASTIC_STEPS, "global_batch": ELASTIC_BATCH}
        restarts_from: dict[str, Any] = {}  # each restarted phase: the checkpoint its group restarted from
        try:
            for phase in PHASES:
                name, _, restarted, _ = phase
                if restarted and name != "back, rank 1":  # the group restarts: from the last checkpoint kept
                    restarts_from[name] = (kept.kept[-1], kept.metrics[-1]) if kept.kept else (None, {})
                if name == "back, rank 1":  # the same group as "back, rank 0": the same checkpoint
                    restarts_from[name] = restarts_from["back, rank 0"]
                checkpoint = restarts_from[name][0] if restarted else None
                try:
                    fit_locally(
                        _as_worker(elastic_count, reports, kept, phase, checkpoint),
                        loop_config,
                        limit_s=LOCAL_RUN_LIMIT_S,
                    )
                except LocalLate:
                    raise
                except Exception as error:  # the learner's own error, as it is (local mode does not wrap it)
                    raise raised_locally(error, f" as {_said(name)}") from None
            return _judge_elastic(reports, kept, {name: metrics for name, (_, metrics) in restarts_from.items()})
        finally:
            kept.close()

    return check("02c.2", run, limit_s=ELASTIC_LIMIT_S)


def _said(name: str) -> str:
    """How a message names the phase ``name``."""
    return {
        "rank 1 of 2": "rank 1 of 2",
        "rank 0 of 2": "rank 0 of 2",
        "alone": "the one worker left after the node left",
        "back, rank 0": "rank 0 of 2 after the node came back",
        "back, rank 1": "rank 1 of 2 after the node came back",
    }[name]


def _steps(calls: list[dict]) -> list[Any]:
    """The steps reported, one per call (None where a report named no step)."""
    return [call.get("metrics", {}).get("step") for call in calls]


def _judge_elastic(reports: Reports, kept: Kept, restarted_at: dict[str, dict]) -> str:
    """02c.2's findings on the five workers' reports (``restarted_at``: the metrics of the checkpoint each restarted
    phase began from): raises the first, or returns the ✓ message."""
    half, whole = ELASTIC_BATCH // 2, ELASTIC_BATCH
    # each phase's reports that reached Ray Train: not the one its resize stopped (a step after the phase's last)
    calls = {name: _calls(reports, name, last) for name, _, _, last in PHASES}
    assert calls["rank 0 of 2"], (
        "as rank 0 of 2 your function reported nothing: call `ray.train.report({'step': step, 'rows': rows}, "
        "checkpoint=...)` once per step"
    )
    assert calls["rank 1 of 2"], (
        "as rank 1 of 2 your function reported nothing: `ray.train.report` waits until every worker has called it, "
        "so rank 0 would wait forever (the hang of section 4). Every rank reports every step; only rank 0 attaches "
        "a checkpoint"
    )
    every = [call for phase_calls in calls.values() for call in phase_calls]
    named = sorted(set().union(*(call.get("metrics", {}) for call in every)) - {"attempt"})
    assert all({"step", "rows"} <= set(call.get("metrics", {})) for call in every), (
        f"your reports hold {named}: report `step` and `rows` each step; the check reads them by those names"
    )
    rank1 = calls["rank 1 of 2"]
    assert len(rank1) == ELASTIC_STEPS, (
        f"as rank 1 of 2 your function reported {len(rank1)} times (steps {_steps(rank1)}) in a run of "
        f"{ELASTIC_STEPS} steps: every rank reports once per step, or the others wait for it at `ray.train.report`"
    )
    on_rank1 = [call for name in ("rank 1 of 2", "back, rank 1") for call in calls[name] if call["checkpoint"]]
    assert not on_rank1, (
        f"rank 1 attached a checkpoint to {len(on_rank1)} of its reports: Ray Train copies every rank's checkpoint "
        "files into the one folder of that report, so rank 1's files land on rank 0's (the same names: the last "
        "copy wins), for a model that DDP keeps the same on every rank. Rank 0 alone attaches one; the others pass "
        "`checkpoint=None`"
    )
    assert kept.metrics, (
        "rank 0 attached no checkpoint: after the node left, the run had nothing to go on from. Attach "
        "`ray.train.Checkpoint.from_directory(folder)`, with the step saved in it, to rank 0's report"
    )
    rows = {name: sorted({call["metrics"]["rows"] for call in phase_calls}) for name, phase_calls in calls.items()}
    for name in ("rank 0 of 2", "rank 1 of 2"):
        assert rows[name] == [half], (
            f"as {_said(name)} your function took {rows[name]} rows a step, but the global batch was {whole}: each "
            f"worker takes its share, `loop_config['global_batch'] // world_size` ({half} here), with the world "
            "size from `ray.train.get_context().get_world_size()`"
        )
    for name, share in (("alone", whole), ("back, rank 0", half), ("back, rank 1", half)):
        _judge_restart(name, calls[name], restarted_at[name], calls)
        assert rows[name] == [share], (
            f"as {_said(name)} your function took {rows[name]} rows a step, where its share of the global batch of "
            f"{whole} was {share}: read the world size each time your function starts (Ray Train starts it again "
            "after every resize) and take `global_batch // world_size` rows"
        )
    alone = _steps(calls["alone"])
    return (
        f"each of 2 workers took {half} of the {whole} rows a step; after the node left, the one worker went on from "
        f"step {alone[0]} with all {whole}; when it came back, both ranks went on from step "
        f"{_steps(calls['back, rank 0'])[0]} with {half} each, to step {ELASTIC_STEPS}; every rank reported every "
        "step, rank 0 alone with a checkpoint"
    )


def _judge_restart(name: str, phase_calls: list[dict], checkpoint: dict, calls: dict) -> None:
    """One restarted worker's steps: from the step after its checkpoint's, one at a time, to the end of its phase."""
    saved = checkpoint.get("step")
    steps = _steps(phase_calls)
    last = dict((phase[0], phase[3]) for phase in PHASES)[name] or ELASTIC_STEPS
    expected = list(range(saved + 1, last + 1)) if isinstance(saved, int) else None
    who = _said(name)
    assert steps, (
        f"as {who} your function reported no step: after a resize it must go on, from the step after the "
        f"checkpoint's, to `loop_config['steps']` ({ELASTIC_STEPS} here)"
    )
    if name == "back, rank 1":
        rank0 = _steps(calls["back, rank 0"])
        assert not (steps[0] == 1 and rank0 and rank0[0] != 1), (
            f"as {who} your function started again at step 1, while rank 0 went on from step {rank0[0]}: rank 1 "
            "would report other steps than rank 0 and the two would wait for each other. Ray Train gives every "
            "worker of the restarted group the same checkpoint: read `ray.train.get_checkpoint()` on every rank, "
            "not on rank 0 only"
        )
    assert not (steps[0] == 1 and isinstance(saved, int) and saved >= 1), (
        f"as {who} your function counted from step 1 again, though the checkpoint it restarted from held step "
        f"{saved}: go on after the step saved in `ray.train.get_checkpoint()` when it is not None"
    )
    until = "`loop_config['steps']`" if last == ELASTIC_STEPS else "the next resize"
    assert steps == expected, (
        f"as {who} your function reported steps {steps}, restarted from a checkpoint of step {saved}: go on with the "
        f"step after the checkpoint's, one at a time, up to {until} ({last} here)"
    )
