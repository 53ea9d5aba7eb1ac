"""Notebook 00's checks (course.exercises.ray_core, and the watch over 00.1's tasks in task_watch): "not done yet" for
an untouched exercise, a message that names the mistake for each half-right answer (never an exception, never a hang),
and done for a right answer. The solutions notebook runs them too (tests/lessons/test_solutions.py).

What a learner who half understands writes, and the verdict each gets (a function or class below for each):

00.1, `run_as_they_finish(work, items, on_result)`:
- `work(item)` called in this notebook, no task (in_this_process); a task per item, but also a plain `work(item)`
  call for the return value (also_runs_here); `ray.remote(work)(item)`, without `.remote` (no_dot_remote).
- `ray.get(task.remote(item))` inside the loop: one task at a time (get_inside_the_loop).
- every task started, then `ray.get` on the whole list (get_all_then_report), or `ray.wait` with
  `num_returns=len(refs)` (waits_for_all_at_once): on_result only after the slowest; `ray.get` on each ref in the
  items' order (get_each_in_item_order): on_result not in the order the tasks end.
- results appended as the tasks end, returned in that order (in_finishing_order).
- refs in a dict keyed by the item: a repeated item loses its task's ref (keyed_by_item).
- results taken with `ray.wait`, then every task started again for the return value (started_again).
- `ray.wait(refs)` on the full list each time: the same ready ref comes back (waits_on_every_ref).
- `ray.wait(pending, num_returns=2)`: results handed over two at a time, the first held back until the second task
  ends (waits_for_two; a pair's refs come back in any order, so the verdict names either the order or the wait:
  test_a_result_held_back_is_found shows the wait's alone).
- `ready, _ = ray.wait(pending)` with `pending` never shrinking: the loop never ends (never_ends).
- tasks that ask for what no node has: `ray.get` waits for ever (cannot_be_scheduled).
- refs returned instead of results (returns_refs); `ray.get(ready)` on the list of one (results_in_lists); nothing
  returned (forgets_to_return); an index past the end (raises).
- on_result given (result, item) (result_and_item_swapped), the ref (on_result_gets_refs), or the position instead
  of the item (on_result_gets_positions); on_result never called (never_calls_on_result).
Right answers of other shapes pass: a list and `refs.index`, Futures, a loop then `ray.get(refs)`.

00.2, `Tally`:
- a plain class, no `@ray.remote` (Plain); a task (a_task); a running actor handed over (the handle test); 42.
- counts in a class attribute or a global, shared between tallies (SharedCounts, GlobalCounts); in a local
  variable of `add` (Forgets).
- `add` that returns nothing (ReturnsNothing), the count before this one (CountsBefore), the dict (ReturnsTheDict),
  how many labels in all (TotalNotPerLabel), how many distinct labels (DistinctLabels); `self.seen[label] += 1`
  with no start at 0 (NoStartAtZero); `counts()` as a list (CountsAsList); an `__init__` with arguments
  (TakesLabels); `count` for `counts` (NoCountsMethod).
- no resource request, Ray's default (WithoutRequest), `num_cpus=0.1` (FractionOfCpu), `.options(num_cpus=1)`, a GPU
  asked for (WithGpu).
- an async actor that awaits between reading and writing a count (AsyncRace).
Right answers of other shapes pass: an async actor (AsyncTally), `.options(num_cpus=0)` (WithOptions), a
`collections.Counter` with `num_gpus=0` said aloud (CounterTally).
"""

from __future__ import annotations

import time

import pytest
import ray
from exercise_checks import expect, leave_ray

from course.exercises import checking, task_watch
from course.exercises import ray_core as core


@pytest.fixture(scope="module")
def on_ray():
    from course.cluster import init_ray

    init_ray()
    yield
    leave_ray()


# --- 00.1: a slow loop as tasks, results as they finish ---------------------------------------------------------


def untouched_loop(work, items, on_result) -> list:
    raise NotImplementedError  # your code


def right(work, items, on_result) -> list:
    task = ray.remote(work)
    index_of = {task.remote(item): i for i, item in enumerate(items)}
    results = [None] * len(items)
    pending = list(index_of)
    while pending:
        [ready], pending = ray.wait(pending)
        results[index_of[ready]] = ray.get(ready)
        on_result(items[index_of[ready]], results[index_of[ready]])
    return results


def in_this_process(work, items, on_result) -> list:
    results = []
    for item in items:
        results.append(work(item))
        on_result(item, results[-1])
    return results


def get_inside_the_loop(work, items, on_result) -> list:
    task, results = ray.remote(work), []
    for item in items:
        results.append(ray.get(task.remote(item)))  # waits for each task before starting the next
        on_result(item, results[-1])
    return results


def get_all_then_report(work, items, on_result) -> list:
    task = ray.remote(work)
    results = ray.get([task.remote(item) for item in items])  # waits for the slowest
    for item, result in zip(items, results, strict=True):
        on_result(item, result)
    return results


def in_finishing_order(work, items, on_result) -> list:
    task = ray.remote(work)
    item_of = {task.remote(item): item for item in items}
    results, pending = [], list(item_of)
    while pending:
        [ready], pending = ray.wait(pending)
        results.append(ray.get(ready))
        on_result(item_of[ready], results[-1])
    return results  # in the order the tasks ended


def get_each_in_item_order(work, items, on_result) -> list:
    task = ray.remote(work)
    refs = [task.remote(item) for item in items]  # all started at once: right so far
    results = []
    for item, ref in zip(items, refs, strict=True):
        results.append(ray.get(ref))  # but waits for each in the items' order, not as they finish
        on_result(item, results[-1])
    return results


def never_ends(work, items, on_result) -> list:
    task = ray.remote(work)
    pending = [task.remote(item) for item in items]
    while pending:
        ready, _ = ray.wait(pending)  # the ready refs stay in `pending`: the loop never ends


def raises(work, items, on_result) -> list:
    return [ray.remote(work).remote(item) for item in items][len(items)]


def right_by_index(work, items, on_result) -> list:
    """Another right answer: a list of refs, and `refs.index` to find a ready ref's item."""
    task = ray.remote(work)
    refs = [task.remote(item) for item in items]
    results, pending = [None] * len(items), list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        i = refs.index(ready[0])
        results[i] = ray.get(ready[0])
        on_result(items[i], results[i])
    return results


def waits_for_two(work, items, on_result) -> list:
    """Half right: results taken two at a time, so the first of each pair waits for the second task to end."""
    task = ray.remote(work)
    refs = [task.remote(item) for item in items]
    position = {ref: i for i, ref in enumerate(refs)}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=min(2, len(pending)))
        for ref in ready:
            on_result(items[position[ref]], ray.get(ref))
    return ray.get(refs)


def right_with_futures(work, items, on_result) -> list:
    """Another right answer: each ref as a concurrent.futures Future, taken as they complete."""
    import concurrent.futures

    task = ray.remote(work)
    index_of = {task.remote(item).future(): i for i, item in enumerate(items)}
    results = [None] * len(items)
    for future in concurrent.futures.as_completed(index_of):
        i = index_of[future]
        results[i] = future.result()
        on_result(items[i], results[i])
    return results


def keyed_by_item(work, items, on_result) -> list:
    """Refs in a dict keyed by the item: a repeated item's second ref replaces its first."""
    task = ray.remote(work)
    ref_of = {item: task.remote(item) for item in items}
    item_of = {ref: item for item, ref in ref_of.items()}
    result_of, pending = {}, list(item_of)
    while pending:
        [ready], pending = ray.wait(pending)
        result_of[item_of[ready]] = ray.get(ready)
        on_result(item_of[ready], result_of[item_of[ready]])
    return [result_of[item] for item in items]


def started_again(work, items, on_result) -> list:
    """Handles each result as it comes, then starts every task again for the return value."""
    task = ray.remote(work)
    item_of = {task.remote(item): item for item in items}
    pending = list(item_of)
    while pending:
        [ready], pending = ray.wait(pending)
        on_result(item_of[ready], ray.get(ready))
    return ray.get([task.remote(item) for item in items])


def cannot_be_scheduled(work, items, on_result) -> list:
    """Asks for a resource no node has: the tasks wait for ever, and so does ray.get."""
    task = ray.remote(work).options(resources={"no_node_has_this": 1})
    refs = [task.remote(item) for item in items]
    return ray.get(refs)


def returns_refs(work, items, on_result) -> list:
    task = ray.remote(work)
    index_of = {task.remote(item): i for i, item in enumerate(items)}
    refs, pending = [None] * len(items), list(index_of)
    while pending:
        [ready], pending = ray.wait(pending)
        refs[index_of[ready]] = ready  # the ref, not its result
        on_result(items[index_of[ready]], ray.get(ready))
    return refs


def results_in_lists(work, items, on_result) -> list:
    task = ray.remote(work)
    index_of = {task.remote(item): i for i, item in enumerate(items)}
    results, pending = [None] * len(items), list(index_of)
    while pending:
        ready, pending = ray.wait(pending)
        results[index_of[ready[0]]] = ray.get(ready)  # a list of one ref gives a list of one result
        on_result(items[index_of[ready[0]]], results[index_of[ready[0]]][0])
    return results


def waits_for_all_at_once(work, items, on_result) -> list:
    task = ray.remote(work)
    index_of = {task.remote(item): i for i, item in enumerate(items)}
    ready, _ = ray.wait(list(index_of), num_returns=len(index_of))  # every one: as slow as ray.get on the list
    results = [None] * len(items)
    for ref in ready:
        results[index_of[ref]] = ray.get(ref)
        on_result(items[index_of[ref]], results[index_of[ref]])
    return results


def forgets_to_return(work, items, on_result) -> None:
    task = ray.remote(work)
    item_of = {task.remote(item): item for item in items}
    pending = list(item_of)
    while pending:
        [ready], pending = ray.wait(pending)
        on_result(item_of[ready], ray.get(ready))


def result_and_item_swapped(work, items, on_result) -> list:
    task = ray.remote(work)
    index_of = {task.remote(item): i for i, item in enumerate(items)}
    results, pending = [None] * len(items), list(index_of)
    while pending:
        [ready], pending = ray.wait(pending)
        results[index_of[ready]] = ray.get(ready)
        on_result(results[index_of[ready]], items[index_of[ready]])
    return results


def also_runs_here(work, items, on_result) -> list:
    """Tasks for on_result, then a plain call of `work` per item for the return value."""
    task = ray.remote(work)
    item_of = {task.remote(item): item for item in items}
    pending = list(item_of)
    while pending:
        [ready], pending = ray.wait(pending)
        on_result(item_of[ready], ray.get(ready))
    return [work(item) for item in items]


def no_dot_remote(work, items, on_result) -> list:
    task = ray.remote(work)
    results = [task(item) for item in items]  # a remote function is not called directly
    for item, result in zip(items, results, strict=True):
        on_result(item, result)
    return results


def waits_on_every_ref(work, items, on_result) -> list:
    """`ray.wait(refs)` on the full list, once per item: the first ready ref comes back each time."""
    task = ray.remote(work)
    refs = [task.remote(item) for item in items]
    results = [None] * len(items)
    for _ in items:
        [ready], _ = ray.wait(refs)
        i = refs.index(ready)
        results[i] = ray.get(ready)
        on_result(items[i], results[i])
    return results


def on_result_gets_refs(work, items, on_result) -> list:
    task = ray.remote(work)
    index_of = {task.remote(item): i for i, item in enumerate(items)}
    results, pending = [None] * len(items), list(index_of)
    while pending:
        [ready], pending = ray.wait(pending)
        results[index_of[ready]] = ray.get(ready)
        on_result(items[index_of[ready]], ready)  # the ref, not its result
    return results


def on_result_gets_positions(work, items, on_result) -> list:
    task = ray.remote(work)
    index_of = {task.remote(item): i for i, item in enumerate(items)}
    results, pending = [None] * len(items), list(index_of)
    while pending:
        [ready], pending = ray.wait(pending)
        results[index_of[ready]] = ray.get(ready)
        on_result(index_of[ready], results[index_of[ready]])  # the position, not the item
    return results


def never_calls_on_result(work, items, on_result) -> list:
    task = ray.remote(work)
    return ray.get([task.remote(item) for item in items])


def right_get_all_at_the_end(work, items, on_result) -> list:
    """Another right answer, the lesson's way: handle each as it ends, then `ray.get(refs)` (kept: nothing reruns)."""
    task = ray.remote(work)
    refs = [task.remote(item) for item in items]
    position = {ref: i for i, ref in enumerate(refs)}
    pending = list(refs)
    while pending:
        [ready], pending = ray.wait(pending)
        on_result(items[position[ready]], ray.get(ready))
    return ray.get(refs)


def test_an_untouched_loop_is_not_done_yet_without_starting_ray():
    expect(core.check_as_they_finish(untouched_loop), checking.NOT_DONE, "replace `raise NotImplementedError`")


@pytest.mark.cluster
def test_as_they_finish_refuses_each_half_right_answer(on_ray):
    expect(core.check_as_they_finish(in_this_process), checking.WRONG, "ran in this notebook's process")
    expect(core.check_as_they_finish(get_inside_the_loop), checking.WRONG, "one after another", "ray.get")
    expect(core.check_as_they_finish(get_all_then_report), checking.WRONG, "only after every task", "ray.wait")
    verdict = core.check_as_they_finish(get_each_in_item_order)
    expect(verdict, checking.WRONG, "but the tasks ended in the order", "ray.wait")
    expect(core.check_as_they_finish(in_finishing_order), checking.WRONG, "in the order the tasks finished")
    expect(core.check_as_they_finish(raises), checking.WRONG, "it raised IndexError")


@pytest.mark.cluster
def test_as_they_finish_refuses_what_a_half_understanding_writes(on_ray):
    expect(core.check_as_they_finish(keyed_by_item), checking.WRONG, "comes 2 times", "key it by the ref")
    expect(core.check_as_they_finish(started_again), checking.WRONG, "started tasks again", "`ray.get(ref)` gives it")
    expect(core.check_as_they_finish(returns_refs), checking.WRONG, "object refs, not results")
    expect(core.check_as_they_finish(results_in_lists), checking.WRONG, "in a list of one", "ray.get(ready[0])")
    expect(core.check_as_they_finish(waits_for_all_at_once), checking.WRONG, "only after every task")
    expect(core.check_as_they_finish(forgets_to_return), checking.WRONG, "it returned NoneType")
    expect(core.check_as_they_finish(result_and_item_swapped), checking.WRONG, "on_result(item, result)")


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("answer", "phrases"),
    [
        (also_runs_here, ["in this notebook's process besides its tasks", "ray.get(ref)"]),
        (no_dot_remote, ["it raised TypeError", ".remote()"]),
        (waits_on_every_ref, ["hands back a ready ref again", "ray.wait(pending)"]),
        (on_result_gets_refs, ["object refs as results", "ray.get(ready)"]),
        (on_result_gets_positions, ["positions", "`items[i]`"]),
        (never_calls_on_result, ["`on_result` was never called"]),
        (waits_for_two, ["one at a time"]),  # held back, or (by chance) handed over out of the finishing order
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_as_they_finish_refuses_more_half_understood_answers(on_ray, answer, phrases):
    expect(core.check_as_they_finish(answer), checking.WRONG, *phrases)


@pytest.mark.cluster
def test_tasks_that_cannot_be_scheduled_are_named_and_cancelled(on_ray):
    from ray.util.state import list_tasks

    verdict = core.check_as_they_finish(cannot_be_scheduled, limit_s=8)
    expect(verdict, checking.WRONG, "no task had started: all of them waited", "no_node_has_this", "cancelled")
    job = ray.get_runtime_context().get_job_id()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the state API hears of the cancellation a moment later
        address = ray.get_runtime_context().gcs_address  # other Rays may run on this machine
        waiting = list_tasks(address, filters=[("job_id", "=", job), ("state", "=", "PENDING_NODE_ASSIGNMENT")])
        if not [task for task in waiting if task.name == "work"]:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"tasks still waiting after the check: {waiting}")


@pytest.mark.cluster
def test_a_loop_that_never_ends_gets_a_verdict_in_time(on_ray):
    # 20 s: time for every task to end on a loaded 2-core machine (the busy loop competes with the workers' start-up;
    # at 5 s only 2 of 5 had ended once), so that the verdict is the one about a loop that never ends
    verdict = core.check_as_they_finish(never_ends, limit_s=20)
    expect(verdict, checking.WRONG, "had not returned after 20 s", "does your loop end", "ray.wait(pending)")


@pytest.mark.cluster
def test_a_task_still_running_when_the_check_ends_ends_quietly(on_ray):
    """An answer that returns before its tasks end leaves them running; the check's clock is gone by then. Each task
    must still end normally: a task that fails prints its error under the learner's next try."""
    clock = ray.remote(num_cpus=0)(task_watch.Clock).remote()
    work = ray.remote(task_watch.slow_work(clock))
    ray.kill(clock)
    assert ray.get(work.remote(1), timeout=60) == 1


@pytest.mark.cluster
def test_as_they_finish_passes_the_right_answer(on_ray):
    expect(core.check_as_they_finish(right), checking.DONE, "as they ended", "in the order of the items")


@pytest.mark.cluster
@pytest.mark.parametrize("answer", [right_by_index, right_with_futures, right_get_all_at_the_end])
def test_as_they_finish_passes_other_right_answers(on_ray, answer):
    expect(core.check_as_they_finish(answer), checking.DONE, "as they ended")


# --- 00.2: a tally that many tasks report to -------------------------------------------------------------------


def counting_class() -> type:
    """A right tally's class, new at each call (Ray's @ray.remote takes a class once)."""

    class Counts:
        def __init__(self) -> None:
            self.seen: dict[str, int] = {}

        def add(self, label: str) -> int:
            self.seen[label] = self.seen.get(label, 0) + 1
            return self.seen[label]

        def counts(self) -> dict[str, int]:
            return dict(self.seen)

    return Counts


Plain = counting_class()
Tally = ray.remote(num_cpus=0)(counting_class())
WithoutRequest = ray.remote(counting_class())  # Ray's default: 1 CPU to be placed
WithGpu = ray.remote(num_cpus=0, num_gpus=1)(counting_class())

SHARED: dict[str, int] = {}


@ray.remote(num_cpus=0)
class SharedCounts:
    seen: dict[str, int] = {}  # a class attribute: every instance in a process shares it

    def add(self, label: str) -> int:
        self.seen[label] = self.seen.get(label, 0) + 1
        return self.seen[label]

    def counts(self) -> dict[str, int]:
        return dict(self.seen)


@ray.remote(num_cpus=0)
class GlobalCounts:
    def add(self, label: str) -> int:
        SHARED[label] = SHARED.get(label, 0) + 1
        return SHARED[label]

    def counts(self) -> dict[str, int]:
        return dict(SHARED)


@ray.remote(num_cpus=0)
class Forgets:
    def add(self, label: str) -> int:
        seen = {label: 1}  # a local variable: gone when add returns
        return seen[label]

    def counts(self) -> dict[str, int]:
        return {}


@ray.remote
class Untouched:
    def __init__(self) -> None:
        raise NotImplementedError  # your code

    def add(self, label: str) -> int:
        raise NotImplementedError  # your code

    def counts(self) -> dict[str, int]:
        raise NotImplementedError  # your code


@ray.remote(num_cpus=0)
class TotalNotPerLabel:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def add(self, label: str) -> int:
        self.seen[label] = self.seen.get(label, 0) + 1
        return sum(self.seen.values())  # how many labels in all, not how many of this one

    def counts(self) -> dict[str, int]:
        return dict(self.seen)


@ray.remote
def a_task(label: str) -> int:
    return 1


@ray.remote(num_cpus=0)
class AsyncTally:
    """A right answer: an async actor (its calls run in one event loop; `add` has no await inside)."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    async def add(self, label: str) -> int:
        self.seen[label] = self.seen.get(label, 0) + 1
        return self.seen[label]

    async def counts(self) -> dict[str, int]:
        return dict(self.seen)


@ray.remote(num_cpus=0)
class AsyncRace:
    """An async actor that awaits between reading a count and writing it: concurrent calls lose counts."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    async def add(self, label: str) -> int:
        import asyncio

        before = self.seen.get(label, 0)
        await asyncio.sleep(0.05)  # another call runs here, and reads the same `before`
        self.seen[label] = before + 1
        return self.seen[label]

    async def counts(self) -> dict[str, int]:
        return dict(self.seen)


WithOptions = ray.remote(counting_class())  # asks for nothing itself: the check is given .options(num_cpus=0)


class ReturnsNothing:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def add(self, label: str) -> None:
        self.seen[label] = self.seen.get(label, 0) + 1  # counts, but does not say how many

    def counts(self) -> dict[str, int]:
        return dict(self.seen)


class CountsBefore(ReturnsNothing):
    def add(self, label: str) -> int:
        before = self.seen.get(label, 0)
        self.seen[label] = before + 1
        return before  # the count before this one


class ReturnsTheDict(ReturnsNothing):
    def add(self, label: str) -> dict:
        self.seen[label] = self.seen.get(label, 0) + 1
        return self.seen


class CountsAsList(ReturnsNothing):
    def add(self, label: str) -> int:
        self.seen[label] = self.seen.get(label, 0) + 1
        return self.seen[label]

    def counts(self) -> list:
        return sorted(self.seen.items())


class TakesLabels(CountsAsList):
    def __init__(self, labels: list[str]) -> None:
        self.seen = dict.fromkeys(labels, 0)

    def counts(self) -> dict[str, int]:
        return dict(self.seen)


class NoCountsMethod:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def add(self, label: str) -> int:
        self.seen[label] = self.seen.get(label, 0) + 1
        return self.seen[label]

    def count(self) -> dict[str, int]:  # `count`, not `counts`
        return dict(self.seen)


class DistinctLabels(ReturnsNothing):
    def add(self, label: str) -> int:
        self.seen[label] = self.seen.get(label, 0) + 1
        return len(self.seen)  # how many different labels, not how many of this one


class NoStartAtZero(ReturnsNothing):
    def add(self, label: str) -> int:
        self.seen[label] += 1  # KeyError the first time a label comes
        return self.seen[label]


@ray.remote(num_cpus=0, num_gpus=0)
class CounterTally:
    """A right answer: a collections.Counter, and num_gpus=0 said aloud."""

    def __init__(self) -> None:
        from collections import Counter

        self.seen = Counter()

    def add(self, label: str) -> int:
        self.seen[label] += 1
        return self.seen[label]

    def counts(self) -> dict[str, int]:
        return self.seen


FractionOfCpu = ray.remote(num_cpus=0.1)(counting_class())


def test_the_tally_check_refuses_what_needs_no_cluster_to_tell():
    expect(core.check_tally(Untouched), checking.NOT_DONE)
    expect(core.check_tally(Plain), checking.WRONG, "plain class", "@ray.remote")
    expect(core.check_tally(a_task), checking.WRONG, "a task keeps nothing between calls")
    expect(core.check_tally(SharedCounts), checking.WRONG, "share their counts", "in `self`")
    expect(core.check_tally(GlobalCounts), checking.WRONG, "share their counts")
    expect(core.check_tally(Forgets), checking.WRONG, "then 1 again", "in `self` between calls")
    expect(core.check_tally(WithoutRequest), checking.WRONG, "1 CPU (the default", "num_cpus=0")
    expect(core.check_tally(WithGpu), checking.WRONG, "needs no GPU")


def test_the_tally_check_refuses_what_a_half_understanding_writes():
    expect(core.check_tally(ray.remote(num_cpus=0)(ReturnsNothing)), checking.WRONG, "returned None", "no `return`")
    expect(core.check_tally(TotalNotPerLabel), checking.WRONG, "`add('dog')` returned 3", "not how many labels in all")
    expect(core.check_tally(ray.remote(num_cpus=0)(DistinctLabels)), checking.WRONG, "The counts are kept")
    expect(core.check_tally(ray.remote(num_cpus=0)(NoStartAtZero)), checking.WRONG, "KeyError", "start it at 0")
    expect(core.check_tally(ray.remote(num_cpus=0)(CountsBefore)), checking.WRONG, "returned 0, then 1", "included")
    expect(core.check_tally(ray.remote(num_cpus=0)(ReturnsTheDict)), checking.WRONG, "(dict)", "a number")
    expect(core.check_tally(ray.remote(num_cpus=0)(CountsAsList)), checking.WRONG, "`counts()` returned list")
    expect(
        core.check_tally(ray.remote(num_cpus=0)(TakesLabels)), checking.WRONG, "`Tally()` failed, it raised TypeError"
    )
    expect(core.check_tally(ray.remote(num_cpus=0)(NoCountsMethod)), checking.WRONG, "no method `counts`")
    expect(core.check_tally(FractionOfCpu), checking.WRONG, "asks Ray for 0.1 CPU", "num_cpus=0")
    expect(core.check_tally(WithoutRequest.options(num_cpus=1)), checking.WRONG, "asks Ray for 1 CPU")
    expect(core.check_tally(42), checking.WRONG, "not an actor class")


@pytest.mark.cluster
def test_an_actor_handle_is_not_the_class(on_ray):
    handle = Tally.remote()
    try:
        expect(core.check_tally(handle), checking.WRONG, "a running actor", "the class itself")
    finally:
        ray.kill(handle)


@pytest.mark.cluster
def test_the_tally_check_runs_tallies_on_ray(on_ray):
    expect(core.check_tally(Tally), checking.DONE, "kept their own counts", "one call at a time")


@pytest.mark.cluster
def test_the_tally_check_accepts_other_right_answers(on_ray):
    expect(core.check_tally(AsyncTally), checking.DONE, "kept their own counts", "async actor")
    expect(core.check_tally(WithOptions.options(num_cpus=0)), checking.DONE, "kept their own counts")
    expect(core.check_tally(CounterTally), checking.DONE, "kept their own counts")


@pytest.mark.cluster
def test_an_async_tally_that_awaits_mid_count_is_told_why_it_loses_counts(on_ray):
    expect(core.check_tally(AsyncRace), checking.WRONG, "async actor", "no `await` between")


def test_a_result_held_back_is_found():
    """00.1's timing rule, on the check's own events: a result handed over after a later task's end is held back;
    one handed over late but before the next end (a busy machine) is not."""
    step = task_watch.STEP_S
    ended = [(1 * step, 1), (1 * step, 1), (2 * step, 2), (3 * step, 3), (4 * step, 4)]
    order = [1, 1, 2, 3, 4]
    in_time = [at + 0.8 * step for at, _ in ended]
    assert task_watch.held_back(order, in_time, ended) is None
    two_at_a_time = [1 * step, 1 * step, 3 * step + 0.01, 3 * step + 0.02, 4 * step]
    assert task_watch.held_back(order, two_at_a_time, ended) == (2, 3)
