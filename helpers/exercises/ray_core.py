"""Checks for the "Your turn" exercises of notebook 00 (Ray Core), on the rules of :mod:`helpers.exercises.checking`.

Each check runs the learner's code on inputs of its own, on the notebook's Ray, and prints one verdict (``✓``,
``✗`` with a hint, or ``…`` not done yet; kept with the other verdicts in ``results/exercises/00.json``). A check
never raises and never hangs: the learner's code runs under a time limit, and every wait on Ray has one.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from helpers.exercises.checking import Verdict, _attached, _check, _NotDone, attempt, untouched

# 00.1: the check's own slow loop. Item n waits n * STEP_S seconds, so the tasks finish in another order than the
# items come in (1, 2, 3, 4 against 3, 1, 4, 2); run one after another they would take 10 * STEP_S.
AS_THEY_FINISH_ITEMS = (3, 1, 4, 2)
STEP_S = 0.3
TIME_LIMIT_S = 60.0  # for the learner's whole function: the tasks need 4 * STEP_S at once
TALLY_TIME_LIMIT_S = 60.0  # for each of the tally check's waits on Ray
ATTACH_S = 60.0  # more for the whole check: attaching to Ray (a solutions notebook has not), starting actors


class _TimeUp(Exception):
    """Raised inside the learner's code, in its thread, when the time limit has passed."""


def run_with_time_limit(function: Callable, *args: Any, limit_s: float = TIME_LIMIT_S) -> Any:
    """``attempt(function, *args)`` in a thread of its own; after ``limit_s``, :class:`_TimeUp` is raised inside
    that thread (at its next Python line: a loop that never ends stops) and an AssertionError here says so."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = attempt(function, *args)
        except BaseException as error:  # _NotDone, _Raised, or _TimeUp: handed to the caller
            outcome["error"] = error

    thread = threading.Thread(target=target, name="exercise-00", daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_TimeUp))
        thread.join(5)
        raise AssertionError(
            f"it had not returned after {limit_s:.0f} s, though the tasks take "
            f"{max(AS_THEY_FINISH_ITEMS) * STEP_S:.1f} s at once: does your loop end? With `ray.wait`, wait only on "
            "the refs not yet done: "
            "`ready, pending = ray.wait(pending)`, until `pending` is empty"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


class _Clock:
    """One clock for the check (an actor: the tasks may run on any node): when each task started and ended, in
    which process, and when the learner's ``on_result`` saw each item."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, float, int]] = []

    def note(self, what: str, item: int, pid: int) -> None:
        self.events.append((what, item, time.time(), pid))

    def read(self) -> list[tuple[str, int, float, int]]:
        return list(self.events)


def _slow_work(clock: Any) -> Callable[[int], int]:
    """The check's ``work``: item n waits n * STEP_S seconds and returns n * n; the clock hears when."""
    import ray

    def work(item: int) -> int:
        ray.get(clock.note.remote("start", item, os.getpid()))
        time.sleep(item * STEP_S)
        ray.get(clock.note.remote("end", item, os.getpid()))
        return item * item

    return work


def _ran_at_once(starts: dict[int, float], ends: dict[int, float]) -> bool:
    """True when at least two of the tasks were running at the same time."""
    spans = sorted((starts[item], ends[item]) for item in starts)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


def check_as_they_finish(
    run_as_they_finish: Callable[[Callable, Sequence, Callable], Sequence], limit_s: float = TIME_LIMIT_S
) -> Verdict:
    """00.1: ``run_as_they_finish(work, items, on_result)`` runs ``work(item)`` as a Ray task for every item, all at
    once; calls ``on_result(item, result)`` for each as soon as its task ends; returns the results in items' order."""

    def run() -> str:
        if untouched(run_as_they_finish):
            raise _NotDone
        import ray

        _attached()
        clock = ray.remote(num_cpus=0)(_Clock).remote()
        seen: list[tuple[Any, Any]] = []

        def on_result(item: Any, result: Any) -> None:
            seen.append((item, result))
            ray.get(clock.note.remote("seen", item, os.getpid()), timeout=limit_s)

        try:
            items = list(AS_THEY_FINISH_ITEMS)
            returned = run_with_time_limit(run_as_they_finish, _slow_work(clock), items, on_result, limit_s=limit_s)
            events = ray.get(clock.read.remote(), timeout=limit_s)
        finally:
            ray.kill(clock)
        return _judge_as_they_finish(items, returned, seen, events)

    return _check("00.1", run, limit_s=limit_s + ATTACH_S, ray_first=lambda: not untouched(run_as_they_finish))


def _judge_as_they_finish(items: list[int], returned: Any, seen: list, events: list) -> str:
    starts = {item: at for what, item, at, _ in events if what == "start"}
    ends = {item: at for what, item, at, _ in events if what == "end"}
    pids = {pid for what, _, _, pid in events if what in ("start", "end")}
    shown = {item: at for what, item, at, _ in events if what == "seen"}
    expected = [item * item for item in items]
    missing = sorted(set(items) - set(ends))
    assert not missing, (
        f"`work` never ran (or never ended) for the items {missing}: call it once for every item of `items`"
    )
    assert pids != {os.getpid()}, (
        "`work` ran in this notebook's process, one call after another: make it a task with `ray.remote(work)` "
        "and start one per item with `.remote(item)`"
    )
    assert _ran_at_once(starts, ends), (
        "the tasks ran one after another, never two at once: a `ray.get` inside the loop waits for each task "
        "before the next one starts. Start them all first (a list of refs), then collect the results"
    )
    assert isinstance(returned, list | tuple), (
        f"it returned {type(returned).__name__}: return the list of results, one per item"
    )
    returned = list(returned)
    finish_order = sorted(items, key=lambda item: ends[item])
    assert returned != [item * item for item in finish_order] or finish_order == items, (
        f"it returned {returned}: the results in the order the tasks finished. Return them in the order of "
        f"`items` ({expected} here): remember which ref belongs to which item"
    )
    assert returned == expected, (
        f"it returned {returned} for the items {items}; `work` gives {expected}: return what `ray.get` gives "
        "for each item's ref, in the order of `items`"
    )
    assert sorted(seen, key=str) == sorted(zip(items, expected, strict=True), key=str), (
        f"`on_result` got {seen}: call it once per item, with the item and its result, `on_result(item, result)`"
    )
    assert min(shown.values()) < max(ends.values()), (
        "`on_result` was called only after every task had ended: `ray.get` on the whole list waits for all of "
        "them. Take each result as its task ends: `ready, pending = ray.wait(pending)` in a loop"
    )
    order = [item for item, _ in seen]
    assert order == finish_order, (
        f"`on_result` saw the items in the order {order}, but the tasks ended in the order {finish_order}: take "
        "the refs as `ray.wait` hands them back, one at a time"
    )
    took = max(ends.values()) - min(starts.values())
    return (
        f"the tasks ran side by side: {took:.1f} s from the first start to the last end (one after another: "
        f"{sum(items) * STEP_S:.1f} s); on_result saw {order} as they ended, and the results came back in the order "
        "of the items"
    )


# --- 00.2: a stateful actor with a resource request ----------------------------------------------------------


def _python_class(actor_class: Any) -> type:
    """The learner's own class behind ``@ray.remote`` (Ray keeps it as the base of the class it builds)."""
    return actor_class.__ray_metadata__.modified_class.__mro__[1]


def _requested_cpus(actor_class: Any) -> float | None:
    """What the class's ``@ray.remote(num_cpus=...)`` asks for; None when it says nothing (Ray's default)."""
    return actor_class.__ray_metadata__.num_cpus


def _local_state_problem(cls: type) -> str | None:
    """Two instances of the learner's class, here, without Ray: each keeps its own counts, and keeps them."""
    first, second = attempt(cls), attempt(cls)
    for label in ("cat", "cat", "dog"):
        attempt(first.add, label)
    attempt(second.add, "fish")
    counts, other = attempt(first.counts), attempt(second.counts)
    if not isinstance(counts, dict) or not isinstance(other, dict):
        return f"`counts()` returned {type(counts).__name__}: return a dict, label -> how many times `add` got it"
    if "fish" in counts or other.get("cat"):
        return (
            "two Tallies share their counts: they live outside the instance (a global, or a class attribute). On "
            "Ray each actor's process has its own copy of those, and this notebook's copy never changes: keep the "
            "counts in `self`, made in `__init__`"
        )
    if counts != {"cat": 2, "dog": 1}:
        return (
            f"after add('cat'), add('cat'), add('dog'), `counts()` gave {counts}, not {{'cat': 2, 'dog': 1}}: keep "
            "the counts in `self` between calls (a local variable in `add` is gone when `add` returns)"
        )
    return None


def _reporter(tally: Any, labels: list[str]) -> list[int]:
    """A task of the check: sends its labels to the tally, one call each, and returns what ``add`` answered."""
    import ray

    return ray.get([tally.add.remote(label) for label in labels])


def check_tally(tally_class: Any, limit_s: float = TALLY_TIME_LIMIT_S) -> Verdict:
    """00.2: ``Tally``, an actor class that asks Ray for no CPU, counts the labels many tasks send it (``add``
    returns how many of that label so far) and answers ``counts()`` with all of them."""

    def run() -> str:
        import ray
        from ray.actor import ActorClass
        from ray.remote_function import RemoteFunction

        if isinstance(tally_class, RemoteFunction):
            raise AssertionError(
                "`Tally` is a task (a function with @ray.remote): a task keeps nothing between calls. Write a class"
            )
        if not isinstance(tally_class, ActorClass):
            raise AssertionError(
                "`Tally` is a plain class: put `@ray.remote(...)` above it, so that `Tally.remote()` starts an actor"
            )
        cls = _python_class(tally_class)
        if any(untouched(getattr(cls, name, None)) for name in ("__init__", "add", "counts")):
            raise _NotDone
        problem = _local_state_problem(cls)
        assert problem is None, problem
        gpus = tally_class.__ray_metadata__.num_gpus
        assert not gpus, "a tally needs no GPU, and a cluster without one would never start it: drop `num_gpus`"
        cpus = _requested_cpus(tally_class)
        assert cpus == 0, (
            f"`Tally` asks Ray for {'1 CPU (the default when num_cpus is not given)' if cpus is None else cpus} "
            "CPU: while training workers hold every CPU, it could not start. It does almost no work: "
            "`@ray.remote(num_cpus=0)`"
        )
        _attached()
        tallies = [tally_class.remote() for _ in range(2)]
        report = ray.remote(num_cpus=0)(_reporter)
        sent = [["cat", "dog", "cat"], ["cat", "fish"], ["dog", "cat", "cat"]]
        try:
            answers = ray.get([report.remote(tallies[0], labels) for labels in sent], timeout=limit_s)
            answers += ray.get([report.remote(tallies[1], ["owl"])], timeout=limit_s)
            counts = ray.get([tally.counts.remote() for tally in tallies], timeout=limit_s)
        except ray.exceptions.GetTimeoutError:
            raise AssertionError(
                f"the tallies did not answer within {limit_s:.0f} s: does a method wait for something, or ask Ray "
                "for something this cluster lacks?"
            ) from None
        except ray.exceptions.RayError as error:
            cause = getattr(error, "cause", None) or error
            raise AssertionError(
                f"a Tally raised {type(cause).__name__}: {str(cause).strip().splitlines()[-1][:160]}"
            ) from None
        finally:
            for tally in tallies:
                ray.kill(tally)
        expected = {"cat": 5, "dog": 2, "fish": 1}
        assert counts[0] == expected, (
            f"3 tasks sent one tally 'cat' 5 times, 'dog' twice, 'fish' once; `counts()` gave {counts[0]}: every "
            "`add` call must reach the same counts, kept in `self`"
        )
        assert counts[1] == {"owl": 1}, f"a second tally got only 'owl'; its `counts()` gave {counts[1]}"
        said = [
            (label, n) for labels, ns in zip(sent, answers, strict=False) for label, n in zip(labels, ns, strict=False)
        ]
        cats = sorted(n for label, n in said if label == "cat")
        assert cats == [1, 2, 3, 4, 5], (
            f"`add('cat')` answered {cats} over the 5 calls: return how many of that label the tally has counted so "
            "far, after this one (1, 2, 3, 4, 5 in some order: an actor takes its calls one at a time)"
        )
        return (
            "two tallies without a CPU each kept their own counts; 3 tasks on the cluster sent one of them 8 labels, "
            "every one counted, one call at a time"
        )

    # an actor class is run on Ray: attached first, in the caller's thread (see _check)
    return _check("00.2", run, limit_s=3 * limit_s + ATTACH_S, ray_first=lambda: True)
