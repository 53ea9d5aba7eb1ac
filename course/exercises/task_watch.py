"""The watch over the tasks of notebook 00's exercise 00.1 (Ray Core), for :mod:`course.exercises.ray_core` on the rules
of :mod:`course.exercises.checking`: the check's clock (an actor, :class:`Clock`), the slow ``work`` it times
(:func:`slow_work`), and what the clock's events tell: whether the tasks ran at once (:func:`ran_at_once`), whether a
result was held back or seen out of the finishing order (:func:`held_back`, :func:`in_finishing_order`), and, when the
learner's function ran out of time, what it was waiting for, from the clock and Ray's task states; tasks that no node
can run are cancelled (:func:`why_late`).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable
from typing import Any

STEP_S = 0.4  # apart, the tasks' ends: a result handed over later than the next end was held back
SAME_TIME_S = 0.1  # two tasks that end closer together than this may be handed over in either order
STATE_API_S = 10.0  # for asking Ray which of the learner's tasks still wait


class Clock:
    """One clock for the check (an actor: the tasks may run on any node): when each task started and ended, in
    which process, and when the learner's ``on_result`` saw each item."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, float, int]] = []

    def note(self, what: str, item: int, pid: int) -> None:
        self.events.append((what, item, time.time(), pid))

    def read(self) -> list[tuple[str, int, float, int]]:
        return list(self.events)


def slow_work(clock: Any) -> Callable[[int], int]:
    """The check's ``work``: item n waits n * STEP_S seconds and returns n * n; the clock hears when."""
    import ray

    def note(what: str, item: int) -> None:
        try:
            ray.get(clock.note.remote(what, item, os.getpid()))
        except ray.exceptions.RayActorError:  # the check has ended and its clock is gone: a task left running by an
            pass  # answer that returned early just ends, instead of printing an error under the learner's next try

    def work(item: int) -> int:
        note("start", item)
        time.sleep(item * STEP_S)
        note("end", item)
        return item * item

    return work


def ran_at_once(events: list) -> bool:
    """True when at least two of the tasks were running at the same time (a start before an earlier one ended)."""
    running, most = 0, 0
    for what, *_ in sorted((e for e in events if e[0] in ("start", "end")), key=lambda e: e[2]):
        running += 1 if what == "start" else -1
        most = max(most, running)
    return most >= 2


def _waiting_tasks(job: str) -> list:
    """The learner's ``work`` tasks of this job that Ray has found no node for (an ask the cluster cannot meet)."""
    import ray
    from ray.util.state import list_tasks

    filters = [("job_id", "=", job), ("state", "=", "PENDING_NODE_ASSIGNMENT")]
    address = ray.get_runtime_context().gcs_address  # this job's cluster, even where several run on one machine
    found = list_tasks(address, filters=filters, detail=True, timeout=STATE_API_S, raise_on_missing_output=False)
    return [task for task in found if task.func_or_class_name.rsplit(".", 1)[-1] == "work"]


def _cancel(tasks: list) -> None:
    """Cancel tasks that wait for ever (this process owns them: the learner's thread started them here)."""
    import ray

    for task in tasks:
        try:
            ray.cancel(ray.ObjectRef(bytes.fromhex(task.task_id) + struct.pack("<I", 1)))  # the task's return value
        except Exception:  # noqa: BLE001, S112  (a task that cannot be cancelled is left as it is)
            continue


def why_late(items: list[int], events: list, limit_s: float) -> str:
    """What the learner's function was waiting for when its time was up, from the clock and Ray's task states."""
    import ray

    started = sum(what == "start" for what, *_ in events)
    ended = sum(what == "end" for what, *_ in events)
    if started < len(items):
        try:
            waiting = _waiting_tasks(ray.get_runtime_context().get_job_id())
        except Exception:  # noqa: BLE001  (without the state API the message says less)
            waiting = []
        _cancel(waiting)
        asked = f" (each asks for {dict(waiting[0].required_resources)})" if waiting else ""
        return (
            f"it had not returned after {limit_s:.0f} s, and "
            + (
                f"only {started} of the {len(items)} tasks had started: the others"
                if started
                else "no task had started: all of them"
            )
            + f" waited for a node with what they ask for{asked}. A task that asks for more than any node "
            "has (a GPU on a cluster without one, more CPUs than the biggest node) waits for ever, and `ray.get` on "
            "it too (section 4). `ray.remote(work)` asks for 1 CPU, which every node here has"
            + (": the check has cancelled those tasks" if waiting else "")
        )
    if ended == len(items):
        return (
            f"it had not returned after {limit_s:.0f} s, though every task had ended after "
            f"{max(items) * STEP_S:.1f} s: does your loop end? With `ray.wait`, wait only on the refs not yet done: "
            "`ready, pending = ray.wait(pending)`, until `pending` is empty"
        )
    return (
        f"it had not returned after {limit_s:.0f} s; {ended} of the {len(items)} tasks had ended. The tasks take "
        f"{max(items) * STEP_S:.1f} s at once: does your loop wait on something that never comes?"
    )


def _end_times(order: list[int], ended: list[tuple[float, int]]) -> list[float]:
    """When the task of each item in ``order`` ended (an item's repeats take its end times in turn)."""
    ends_of: dict[int, list[float]] = {}
    for at, item in ended:
        ends_of.setdefault(item, []).append(at)
    return [ends_of[item].pop(0) for item in order]


def held_back(order: list[int], shown: list[float], ended: list[tuple[float, int]]) -> tuple[int, int] | None:
    """``(item, later)`` where ``on_result`` got ``item``'s result only after the task of ``later``, which ended
    at least ``STEP_S - SAME_TIME_S`` after it, had ended too; else None. (Any delay under ``STEP_S`` passes: the
    handing over may be slow on a busy machine.)"""
    for item, seen_at, end in zip(order, shown, _end_times(order, ended), strict=False):
        later = [(at, other) for at, other in ended if at > end + SAME_TIME_S]
        if later and seen_at > later[0][0]:
            return item, later[0][1]
    return None


def in_finishing_order(order: list[int], ended: list[tuple[float, int]]) -> bool:
    """True when ``on_result`` saw the items in the order their tasks ended (ends closer than ``SAME_TIME_S``
    either way round)."""
    times = _end_times(order, ended)
    return all(later > earlier - SAME_TIME_S for earlier, later in zip(times, times[1:], strict=False))
