"""Running a learner's training function for the checks of notebooks 02b and 04, in two ways.

First in Ray Train's local mode (``ScalingConfig(num_workers=0)``, :func:`fit_locally`): the function runs in this
process, in seconds, with the same ``ray.train`` calls; whatever local mode can show (an error, a missing checkpoint,
a wrong count of reports, a step lost on resume) gets its verdict from there. Then, only for what needs more than
one rank or a restart (a report on rank 0 only, DDP, a worker killed), on Ray Train workers: every worker is watched,
and one that waits at ``ray.train.report`` for a worker that has ended or not come, or that runs past its limit, is
stopped; the verdict names the rule it broke."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from course.deadline import Late, first_line, within

RESUME_WORKERS = 2  # on one worker, reporting on rank 0 only would pass: with two it would hang (see run_watched)


WORKER_LIMIT_S = 150  # how long a check's Ray Train worker may run the learner's function


BARRIER_WAIT_S = 45  # how long a worker may wait in a report while another worker has reported fewer times


RUN_LIMIT_S = 420  # how long a check waits for its Ray Train run (start-up, a restart, the learner's function)


LOCAL_LIMIT_S = 30  # how long a check's local-mode run may take at most (the learner's function on a small input)


class Crash:
    """Remembers whether the check's worker has died yet: it dies once, whatever the learner's function reports."""

    def __init__(self) -> None:
        self.done = False

    def happened(self) -> bool:
        return self.done

    def now(self) -> bool:
        """True the first time only: the caller dies."""
        first, self.done = not self.done, True
        return first


class Reports:
    """What each worker of a check's Ray Train run did with ``ray.train.report``, kept where the driver reads it.

    Workers are named ``"<attempt>/<rank>"``; each call is a dict (``checkpoint``: whether one was attached, and
    what the check measured around it)."""

    def __init__(self) -> None:
        self.calls: dict[str, list[dict]] = {}
        self.ended: dict[str, int] = {}  # calls made when the worker's function returned
        self.stopped: list[dict] = []  # workers the check stopped, and why

    def begin(self, worker: str) -> bool:
        """``worker``'s function starts; False when the check has stopped a worker of this run already."""
        self.calls.setdefault(worker, [])
        return not self.stopped

    def called(self, worker: str, call: dict) -> None:
        self.calls.setdefault(worker, []).append(call)

    def end(self, worker: str) -> None:
        self.ended[worker] = len(self.calls.get(worker, []))

    def waits_in_vain(self, worker: str, calls: int, waited_s: float) -> str | None:
        """Another worker of the same attempt that made fewer calls than ``worker`` has, and either ended (it will
        never come) or has not come for ``BARRIER_WAIT_S`` seconds while ``worker`` waits in its report. Ray Train
        V2's report is a barrier that every worker must reach."""
        attempt = worker.split("/")[0]
        for other in self.calls:  # every worker that began, reported or not
            if other == worker or other.split("/")[0] != attempt:
                continue
            made = self.ended.get(other, len(self.calls.get(other, [])))
            if made < calls and (other in self.ended or waited_s > BARRIER_WAIT_S):
                return other
        return None

    def stop(self, why: dict) -> None:
        self.stopped.append(why)

    def state(self) -> dict:
        return {"calls": self.calls, "ended": self.ended, "stopped": self.stopped}


def call(target: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """``target.method(...)``: on an actor (a run on Ray Train workers) through Ray, on a plain object (local mode)
    directly."""
    bound = getattr(target, method)
    if hasattr(bound, "remote"):
        import ray

        return ray.get(bound.remote(*args, **kwargs))
    return bound(*args, **kwargs)


class Kept:
    """Local mode keeps a reported checkpoint as the learner's folder, which is often a temporary one, gone when the
    report returns; a run on workers persists it to storage during the report. This keeps a copy of each in a folder
    of the check's own, as a run's storage would: :meth:`keep` gives the checkpoint to report instead. Remove the
    folder with :meth:`close`."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="course-check-"))
        self.kept: list[Any] = []
        self.metrics: list[dict] = []  # the metrics of each report that carried a checkpoint, as a run's result has

    def keep(self, checkpoint: Any, metrics: Any) -> Any:
        from ray.train import Checkpoint

        copy = self.folder / f"checkpoint_{len(self.kept):06d}"
        checkpoint.to_directory(str(copy))
        self.kept.append(Checkpoint.from_directory(str(copy)))
        self.metrics.append(dict(metrics) if isinstance(metrics, dict) else {})
        return self.kept[-1]

    def result(self) -> Any:
        """What ``fit()`` returns on workers, from this run's kept checkpoints: the last one, and the metrics
        reported with each (``metrics_dataframe``)."""
        from types import SimpleNamespace

        frame = pd.DataFrame(self.metrics) if self.metrics else None
        last = self.metrics[-1] if self.metrics else {}
        return SimpleNamespace(checkpoint=self.kept[-1] if self.kept else None, metrics_dataframe=frame, metrics=last)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class LocalLate(AssertionError):
    """A local-mode run still going at :data:`LOCAL_LIMIT_S`: the finding says what to look for."""


def fit_locally(
    train_func: Callable[[dict], Any],
    loop_config: dict,
    datasets: dict | None = None,
    late: str = "",
    limit_s: float = LOCAL_LIMIT_S,
) -> Any:
    """``train_func`` in Ray Train's local mode, ``ScalingConfig(num_workers=0)``: it runs in this process (no
    controller, no worker processes), with ``ray.train``'s calls, world size 1, rank 0, and Ray Data's datasets as
    they are. Stopped at ``limit_s`` (interrupted at its next Python line: :class:`LocalLate`, the finding
    ``late``); what it raises comes as it is, not wrapped."""
    import logging

    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    train = logging.getLogger("ray.train")  # local mode's INFO lines ("Running in local mode", each report's
    level = train.level  # metrics) would land in the learner's cell: the check's own run says nothing
    train.setLevel(logging.WARNING)
    try:
        trainer = TorchTrainer(
            train_func,
            train_loop_config=loop_config,
            datasets=datasets or {},
            scaling_config=ScalingConfig(num_workers=0),
            run_config=RunConfig(name="course-check-local"),
        )
        return within(trainer.fit, limit_s=limit_s, interrupt=True)
    except Late:
        raise LocalLate(
            late
            or (
                f"your function was still running after {limit_s:.0f} s on the check's small input: look for a "
                "loop that never ends, or a wait for something that never comes"
            )
        ) from None
    finally:
        train.setLevel(level)


def run_watched(
    learner: Callable[[dict], Any],
    loop_config: dict,
    reports: Any,
    attempt: int = 1,
    limit_s: float = WORKER_LIMIT_S,
    before_report: Callable[[dict], None] | None = None,
    measure: Callable[[], dict] | None = None,
    kept: Kept | None = None,
) -> None:
    """Run the learner's Ray Train function on this worker with its ``ray.train.report`` calls counted in
    ``reports`` (a ``Reports`` actor), however the function imported ``report`` (the count is made in Ray Train's own
    per-process ``TrainFnUtils``: ``course.internals.watch_reports``). A watchdog stops this worker (its process ends,
    as a lost machine's would)
    when it waits at a report that another worker will never reach, or when it runs past ``limit_s``: the run then
    fails, and the check reads why from ``reports``. ``before_report(metrics)`` runs before each report (02b's
    crash); ``measure()`` adds what the check measured to each call's entry (04.2's batch losses).

    In local mode (``kept``: a :class:`Kept`, ``reports`` a plain :class:`Reports`) nothing is watched: there is one
    worker, no barrier to wait at, and :func:`fit_locally` stops the function at its limit; each checkpoint reported
    is kept, as storage would keep it."""
    import os
    import signal
    import time

    import ray
    import ray.train

    from course.internals import watch_reports  # Ray Train's per-process TrainFnUtils: an entry of course.internals

    rank = ray.train.get_context().get_world_rank()
    worker = f"{attempt}/{rank}"
    if not call(reports, "begin", worker):  # an earlier attempt was stopped: no second wait
        raise RuntimeError("the check stopped this run")
    now = {"calls": 0, "in_report": False, "since": 0.0}

    def watched(real: Callable[..., None]) -> Callable[..., None]:
        """Ray Train's own ``report`` of this process, counted: every spelling of ``ray.train.report`` ends here."""

        def report(metrics: Any, checkpoint: Any = None, **options: Any) -> None:
            now["calls"] += 1
            entry: dict[str, Any] = {"checkpoint": checkpoint is not None, "metrics": plain_metrics(metrics)}
            if isinstance(metrics, dict) and isinstance(metrics.get("loss"), int | float):
                entry["loss"] = float(metrics["loss"])
            call(reports, "called", worker, entry | (measure() if measure else {}))
            if before_report is not None and isinstance(metrics, dict):
                before_report(metrics)
            if isinstance(metrics, dict):
                metrics = {**metrics, "attempt": attempt}
            if kept is not None and checkpoint is not None:
                checkpoint = kept.keep(checkpoint, metrics)
            now["in_report"], now["since"] = True, time.monotonic()
            try:
                real(metrics=metrics, checkpoint=checkpoint, **options)
            finally:
                now["in_report"] = False

        return report

    ended = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + limit_s
        while not ended.wait(1.0):
            waited_s = time.monotonic() - now["since"]
            waited_for = now["in_report"] and ray.get(reports.waits_in_vain.remote(worker, now["calls"], waited_s))
            if waited_for or time.monotonic() > deadline:
                why = {"worker": worker, "calls": now["calls"], "in_report": now["in_report"], "waited_for": waited_for}
                ray.get(reports.stop.remote(why))
                os.kill(os.getpid(), signal.SIGKILL)

    if kept is None:
        threading.Thread(target=watch, daemon=True).start()
    undo = watch_reports(watched)
    try:
        learner(loop_config)
    finally:
        undo()
        ended.set()
        call(reports, "end", worker)


def plain_metrics(metrics: Any) -> dict[str, Any]:
    """The numbers and strings of a report's metrics, as a check keeps them (a model or a tensor is left out)."""
    if not isinstance(metrics, dict):
        return {}
    return {str(name): value for name, value in metrics.items() if isinstance(value, int | float | str | bool)}


def stopped_finding(stopped: list[dict], limit_s: float) -> str:
    """What a check says of a run whose worker it stopped: the rule the learner's function broke."""
    why = stopped[0]
    rank, calls = why["worker"].split("/")[1], why["calls"]
    if why["waited_for"]:
        other = why["waited_for"].split("/")[1]
        return (
            f"worker {rank} called `ray.train.report` {calls} {'time' if calls == 1 else 'times'}, worker {other} "
            "fewer: `ray.train.report` "
            f"waits until every worker has called it, so worker {rank} would have waited forever (the check "
            "stopped it: Ray's lines above about a worker that died or was killed are about that worker, not "
            "your memory). Every worker calls `ray.train.report`, as often as the others; only rank 0 attaches a "
            "checkpoint (the others pass `checkpoint=None`)"
        )
    where = f"in its call number {calls} of `ray.train.report`" if why["in_report"] else "outside `ray.train.report`"
    return (
        f"worker {rank} was still running your function after {limit_s:.0f} s, {where}: look for a loop that never "
        "ends, or a wait for something that never comes. Remember that `ray.train.report` waits until every "
        "worker has called it"
    )


def fit_within(trainer: Any, limit_s: float = RUN_LIMIT_S) -> Any:
    """``trainer.fit()`` in a thread, waited for at most ``limit_s`` seconds: its result, or its exception raised
    here; an AssertionError when the run is still going at the limit (left running: Ray Train has no public way to
    stop it from here)."""
    try:
        return within(trainer.fit, limit_s=limit_s)
    except Late:
        raise AssertionError(
            f"the run did not finish within {limit_s:.0f} s: were its workers ever started (enough free CPUs on the "
            "cluster)? Does your function end?"
        ) from None


def raised_locally(error: BaseException, when: str = "") -> Exception:
    """The finding for an error the learner's function raised in local mode, where it comes as it is: "not done yet"
    for its ``NotImplementedError``, else the error in one line and where to see its traceback."""
    from course.exercises.checking import UNKNOWN_NAME, NotDone, Raised

    if isinstance(error, NotImplementedError):
        return NotDone()
    hint = f" ({UNKNOWN_NAME})" if isinstance(error, NameError) else ""
    return Raised(
        f"your function raised {first_line(error)}{when}{hint}. To see its traceback in your cell, run it in local "
        "mode as lesson 02 does: `TorchTrainer(your_function, train_loop_config=..., "
        "scaling_config=ScalingConfig(num_workers=0)).fit()`"
    )
