"""Checks for the "Your turn" exercises of notebook 00 (Ray Core), on the rules of :mod:`course.exercises.checking`.

Each check runs the learner's code on inputs of its own, on the notebook's Ray, and prints one verdict (``✓``,
``✗`` with a hint, or ``…`` not done yet; kept with the other verdicts in ``results/exercises/00.json``). A check
never raises and never hangs: the learner's code runs under a time limit, and every wait on Ray has one.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from course.deadline import Late, within
from course.exercises.checking import NotDone, Raised, Verdict, attach_ray, attempt, check, untouched
from course.exercises.task_watch import STEP_S, Clock, held_back, in_finishing_order, ran_at_once, slow_work, why_late

# 00.1: the check's own slow loop. Item n waits n * STEP_S seconds, so the tasks finish in another order than the
# items come in (1, 1, 2, 3, 4 against 3, 1, 4, 1, 2); one item comes twice, as items may in a real loop. Run one
# after another the tasks would take 11 * STEP_S. The clock that times them, and what its events tell: task_watch.
AS_THEY_FINISH_ITEMS = (3, 1, 4, 1, 2)
TIME_LIMIT_S = 60.0  # for the learner's whole function: the tasks need 4 * STEP_S at once
TALLY_TIME_LIMIT_S = 60.0  # for each of the tally check's waits on Ray
ATTACH_S = 60.0  # more for the whole check: attaching to Ray (a solutions notebook has not), starting actors


def check_as_they_finish(
    run_as_they_finish: Callable[[Callable, Sequence, Callable], Sequence], limit_s: float = TIME_LIMIT_S
) -> Verdict:
    """00.1: ``run_as_they_finish(work, items, on_result)`` runs ``work(item)`` as a Ray task for every item, all at
    once; calls ``on_result(item, result)`` for each as soon as its task ends; returns the results in items' order."""

    def run() -> str:
        if untouched(run_as_they_finish):
            raise NotDone
        import ray

        attach_ray()
        clock = ray.remote(num_cpus=0)(Clock).remote()
        seen: list[tuple[Any, Any]] = []

        def on_result(item: Any, result: Any) -> None:
            seen.append((item, result))
            ray.get(clock.note.remote("seen", item, os.getpid()), timeout=limit_s)

        items = list(AS_THEY_FINISH_ITEMS)
        try:
            try:
                returned = within(
                    attempt, run_as_they_finish, slow_work(clock), items, on_result, limit_s=limit_s, interrupt=True
                )
            except Late:
                raise AssertionError(why_late(items, ray.get(clock.read.remote(), timeout=limit_s), limit_s)) from None
            events = ray.get(clock.read.remote(), timeout=limit_s)
        finally:
            ray.kill(clock)
        return _judge_as_they_finish(items, returned, seen, events)

    return check("00.1", run, limit_s=limit_s + ATTACH_S, ray_first=lambda: not untouched(run_as_they_finish))


def _judge_as_they_finish(items: list[int], returned: Any, seen: list, events: list) -> str:
    import ray

    wanted = Counter(items)
    started = Counter(item for what, item, _, _ in events if what == "start")
    ended = [(at, item) for what, item, at, _ in sorted(events, key=lambda e: e[2]) if what == "end"]
    pids = {pid for what, _, _, pid in events if what in ("start", "end")}
    here = sum(pid == os.getpid() for what, _, _, pid in events if what == "start")
    expected = [item * item for item in items]
    missing = sorted(set(items) - {item for _, item in ended})
    handled = Counter(item for item, _ in seen)
    over = [item for item, n in handled.items() if n > wanted.get(item, 0)]
    assert not over or not set(handled) <= set(wanted), (
        f"`on_result` was called {len(seen)} times for {len(items)} items, the item {over[0]} "
        f"{handled[over[0]]} times: `ray.wait` hands back a ready ref again each time it is in the list it gets. "
        "Wait only on the refs not yet handled, `ready, pending = ray.wait(pending)`, until `pending` is empty"
    )
    assert not missing, (
        f"`work` never ran for the items {missing}, or had not ended when your function returned: call it once for "
        "every item of `items`, and return once every task has ended"
    )
    assert pids != {os.getpid()}, (
        "`work` ran in this notebook's process, one call after another: make it a task with `ray.remote(work)` "
        "and start one per item with `.remote(item)`"
    )
    assert ran_at_once(events), (
        "the tasks ran one after another, never two at once: a `ray.get` inside the loop waits for each task "
        "before the next one starts. Start them all first (a list of refs), then collect the results"
    )
    assert not here, (
        f"`work` ran {here} times in this notebook's process besides its tasks: a plain `work(item)` call runs it "
        "again, here, one call after another. Call it only as a task; its result comes from `ray.get(ref)`"
    )
    again = {item: n for item, n in started.items() if n > wanted[item]}
    assert not again, (
        f"`work` ran {sum(started.values())} times for {len(items)} items: your code started tasks again (a second "
        "`.remote(item)` for each item, to get the results it had already handled?). A ref's result stays: "
        "`ray.get(ref)` gives it again without running anything. Keep each item's ref, or its result, as it comes"
    )
    short = {item: n for item, n in started.items() if n < wanted[item]}
    assert not short, (
        f"`work` ran {sum(started.values())} times for {len(items)} items: the item "
        f"{next(iter(short))} comes {wanted[next(iter(short))]} times in `items` and got fewer tasks. Run a task for "
        "every entry of `items`, repeats too, as the loop does"
    )
    assert isinstance(returned, list | tuple), (
        f"it returned {type(returned).__name__}: return the list of results, one per item"
    )
    returned = list(returned)
    assert not any(isinstance(value, ray.ObjectRef) for value in returned), (
        "it returned object refs, not results: `ray.get(ref)` turns a ref into its result"
    )
    assert not (len(returned) == len(items) and all(isinstance(v, list) and len(v) == 1 for v in returned)), (
        f"it returned {returned}: each result is in a list of one. `ray.wait` returns lists (`ready` holds one ref), "
        "and `ray.get` on a list gives a list: take the ref out first, `ray.get(ready[0])`"
    )
    finish_order = [item for _, item in ended]
    assert returned != [item * item for item in finish_order] or finish_order == items, (
        f"it returned {returned}: the results in the order the tasks finished. Return them in the order of "
        f"`items` ({expected} here): remember which ref belongs to which item (a dict ref -> index)"
    )
    assert returned == expected, (
        f"it returned {returned} for the items {items}; `work` gives {expected}: return what `ray.get` gives "
        "for each item's ref, in the order of `items`"
    )
    assert not any(isinstance(result, ray.ObjectRef) for _, result in seen), (
        "`on_result` got object refs as results: give it what `ray.get(ready)` returns, `on_result(item, result)`"
    )
    positions = [item for item, _ in seen]
    assert sorted(positions) != list(range(len(items))) or sorted(positions) == sorted(items), (
        f"`on_result` got the items' positions {sorted(positions)} as items: give it the item itself, "
        "`items[i]`, with its result"
    )
    assert seen, "`on_result` was never called: call `on_result(item, result)` for each item as its task ends"
    once = [item for item, n in wanted.items() if n > 1 and handled[item] == 1]
    assert not once, (
        f"`on_result` was called {len(seen)} times for {len(items)} items: the item {once[0]} comes "
        f"{wanted[once[0]]} times in `items` and was handled once. A dict keyed by the item keeps one ref per "
        "distinct item (the second `.remote(1)` replaced the first ref): key it by the ref instead, ref -> index"
    )
    assert sorted(seen, key=str) == sorted(zip(items, expected, strict=True), key=str), (
        f"`on_result` got {seen}: call it once per item, with the item and its result, `on_result(item, result)`"
    )
    shown = [at for what, _, at, _ in events if what == "seen"]
    assert min(shown) < max(at for at, _ in ended), (
        "`on_result` was called only after every task had ended: `ray.get` on the whole list waits for all of "
        "them. Take each result as its task ends: `ready, pending = ray.wait(pending)` in a loop"
    )
    order = [item for item, _ in seen]
    assert in_finishing_order(order, ended), (
        f"`on_result` saw the items in the order {order}, but the tasks ended in the order {finish_order}: take "
        "the refs as `ray.wait` hands them back, one at a time"
    )
    held = held_back(order, shown, ended)
    assert not held, (
        f"`on_result` got the result of item {held[0]} only after the task of item {held[1]} had ended too, though "
        f"it had ended {STEP_S:.1f} s before: a `ray.wait` that waits for more than one ref (`num_returns` above 1) "
        "holds finished results back. Take one ref at a time: `ready, pending = ray.wait(pending)`"
    )
    took = max(at for at, _ in ended) - min(at for what, _, at, _ in events if what == "start")
    return (
        f"the tasks ran side by side: {took:.1f} s from the first start to the last end (one after another: "
        f"{sum(items) * STEP_S:.1f} s); on_result saw {order} as they ended, and the results came back in the order "
        "of the items"
    )


# --- 00.2: a stateful actor with a resource request ----------------------------------------------------------

METHODS = ("__init__", "add", "counts")


def _actor_parts(given: Any) -> tuple[type, dict]:
    """The learner's own class and the options Ray will start it with, from an actor class (``@ray.remote(...)``)
    or an actor class with options (``Tally.options(num_cpus=0)``); an AssertionError says what else it is."""
    from ray.actor import ActorClass, ActorHandle
    from ray.remote_function import RemoteFunction

    if isinstance(given, ActorClass):
        return given.__ray_metadata__.modified_class.__mro__[1], dict(given._default_options)
    remote = getattr(type(given), "remote", None)
    names = getattr(getattr(remote, "__code__", None), "co_freevars", ())
    if type(given).__name__ == "ActorOptionWrapper" and {"actor_cls", "updated_options"} <= set(names):
        cells = dict(zip(names, (cell.cell_contents for cell in remote.__closure__), strict=True))
        return cells["actor_cls"].__ray_metadata__.modified_class.__mro__[1], dict(cells["updated_options"])
    if isinstance(given, RemoteFunction):
        raise AssertionError(
            "`Tally` is a task (a function with @ray.remote): a task keeps nothing between calls. Write a class"
        )
    if isinstance(given, ActorHandle):
        raise AssertionError(
            "you gave the check a running actor (what `Tally.remote()` returns): give it the class itself, "
            "`exercises.check_tally(Tally)`; the check starts tallies of its own"
        )
    if inspect.isclass(given):
        raise AssertionError(
            "`Tally` is a plain class: put `@ray.remote(...)` above it, so that `Tally.remote()` starts an actor"
        )
    raise AssertionError(
        f"the check got a `{type(given).__name__}`, not an actor class: give it `Tally`, the class with `@ray.remote`"
    )


def _call(method: Callable, *args: Any) -> Any:
    """Call one of the learner's methods here, as Ray would: an ``async def`` one is run to its end."""
    value = attempt(method, *args)
    if inspect.isawaitable(value):
        return attempt(asyncio.run, value) if inspect.iscoroutine(value) else attempt(asyncio.run, _wait(value))
    return value


async def _wait(awaitable: Any) -> Any:
    return await awaitable


def _local_state_problem(cls: type) -> str | None:
    """Two instances of the learner's class, here, without Ray: each keeps its own counts, and keeps them."""
    try:
        first, second = attempt(cls), attempt(cls)
    except Raised as raised:
        return (
            f"`Tally()` failed, {raised}: the check starts each tally with no arguments, as the exercise's "
            "`__init__` takes"
        )
    try:
        answers = [_call(first.add, label) for label in ("cat", "cat", "dog")]
    except Raised as raised:
        first_time = (
            " The first `add` of a label finds no count yet: start it at 0" if "KeyError" in str(raised) else ""
        )
        return f"`add('cat')` failed, {raised}.{first_time}"
    _call(second.add, "fish")
    if all(answer is None for answer in answers):
        return (
            "`add('cat')` returned None: `add` has no `return`. The tasks that call it need an answer: return how "
            "many of that label the tally has counted so far, this one included (1 the first time)"
        )
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in answers):
        return (
            f"`add('cat')` returned {answers[0]!r} ({type(answers[0]).__name__}): return how many of that label the "
            "tally has counted so far, after this one (a number: 1 the first time)"
        )
    kept = _call(first.counts)
    if answers[0] == answers[1] and kept == {"cat": 2, "dog": 1}:
        return (
            f"`add('cat')` returned {answers[0]}, then {answers[1]} again, though `counts()` then said 'cat': 2. The "
            "counts are kept: `add` returns another number. Return that label's count, after this one (1, then 2)"
        )
    if answers[0] == answers[1]:
        return (
            f"`add('cat')` returned {answers[0]}, then {answers[1]} again: the count starts over at each call. Keep "
            "the counts in `self` between calls (a local variable in `add` is gone when `add` returns)"
        )
    if answers[:2] != [1, 2]:
        return (
            f"`add('cat')` returned {answers[0]}, then {answers[1]}: return how many of that label the tally has "
            "counted so far, this one included (1, then 2)"
        )
    if answers[2] != 1:
        return (
            f"after two 'cat's, `add('dog')` returned {answers[2]}: return how many of *that* label the tally has "
            "counted (1 'dog' here), not how many labels in all"
        )
    counts, other = _call(first.counts), _call(second.counts)
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


def _is_async(cls: type) -> bool:
    """Ray runs an actor whose methods include an ``async def`` one as an async actor: one event loop, calls
    interleaved at each ``await``."""
    return any(inspect.iscoroutinefunction(getattr(cls, name, None)) for name in ("add", "counts"))


def check_tally(tally_class: Any, limit_s: float = TALLY_TIME_LIMIT_S) -> Verdict:
    """00.2: ``Tally``, an actor class that asks Ray for no CPU, counts the labels many tasks send it (``add``
    returns how many of that label so far) and answers ``counts()`` with all of them. ``Tally.options(...)`` and an
    async actor (``async def add``) are actor classes too."""

    def run() -> str:
        import ray

        cls, options = _actor_parts(tally_class)
        if any(untouched(getattr(cls, name, None)) for name in METHODS):
            raise NotDone
        absent = [name for name in ("add", "counts") if not callable(getattr(cls, name, None))]
        assert not absent, f"`Tally` has no method `{absent[0]}`: the check calls `add(label)` and `counts()`"
        problem = _local_state_problem(cls)
        assert problem is None, problem
        gpus = options.get("num_gpus")
        assert not gpus, "a tally needs no GPU, and a cluster without one would never start it: drop `num_gpus`"
        cpus = options.get("num_cpus")
        asked = "1 CPU (the default when num_cpus is not given)" if cpus is None else f"{cpus} CPU"
        assert cpus == 0, (
            f"`Tally` asks Ray for {asked}: while training workers hold every CPU, it could not start. It does "
            "almost no work: `@ray.remote(num_cpus=0)`"
        )
        asynchronous, threads = _is_async(cls), (options.get("max_concurrency") or 1)
        attach_ray()
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
        said = [
            (label, n) for labels, ns in zip(sent, answers, strict=False) for label, n in zip(labels, ns, strict=False)
        ]
        cats = sorted((n for label, n in said if label == "cat"), key=str)
        at_once = (
            " Your actor runs several calls at once"
            + (" (an async actor: they interleave at each `await`)" if asynchronous else f" ({threads} threads)")
            + ": two `add` calls can read the same count before either writes it back. Read and write the count "
            + ("with no `await` between" if asynchronous else "under a `threading.Lock`, or leave max_concurrency at 1")
            if asynchronous or threads > 1
            else ""
        )
        assert counts[0] == expected, (
            f"3 tasks sent one tally 'cat' 5 times, 'dog' twice, 'fish' once; `counts()` gave {counts[0]}: every "
            "`add` call must reach the same counts, kept in `self`." + at_once
        )
        assert counts[1] == {"owl": 1}, f"a second tally got only 'owl'; its `counts()` gave {counts[1]}"
        assert cats == [1, 2, 3, 4, 5], (
            f"`add('cat')` answered {cats} over the 5 calls: return how many of that label the tally has counted so "
            "far, after this one (1, 2, 3, 4, 5 in some order)."
            + (at_once or " An actor takes its calls one at a time")
        )
        how = (
            "an async actor, whose calls ran in one event loop, each `add` whole"
            if asynchronous
            else "one call at a time"
        )
        return (
            "two tallies without a CPU each kept their own counts; 3 tasks on the cluster sent one of them 8 labels, "
            f"every one counted ({how})"
        )

    def worth_running() -> bool:  # the learner's code does not run here (outside the time limit): only its options
        cls, options = _actor_parts(tally_class)
        asks = options.get("num_cpus") == 0 and not options.get("num_gpus")
        return asks and not any(untouched(getattr(cls, name, None)) for name in METHODS)

    # an actor class is run on Ray: attached first, in the caller's thread (see checking.check)
    return check("00.2", run, limit_s=3 * limit_s + ATTACH_S, ray_first=worth_running)
