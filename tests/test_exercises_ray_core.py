"""Notebook 00's checks (helpers.exercises.ray_core): "not done yet" for an untouched exercise, a message that names
the mistake for each half-right answer (never an exception, never a hang), and done for a right answer. The
solutions notebook runs them too (tests/test_solutions.py)."""

from __future__ import annotations

import pytest
import ray

from helpers.exercises import checking
from helpers.exercises import ray_core as core


@pytest.fixture(autouse=True)
def results_here(tmp_path, monkeypatch):
    monkeypatch.setattr(checking, "RESULTS_DIR", tmp_path)


@pytest.fixture(scope="module")
def on_ray():
    from helpers.course.cluster import init_ray

    init_ray()
    yield
    ray.shutdown()


def expect(verdict: checking.Verdict, state: str, *phrases: str) -> None:
    assert verdict.state == state, verdict
    for phrase in phrases:
        assert phrase in verdict.message, verdict


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
def test_a_loop_that_never_ends_gets_a_verdict_in_time(on_ray):
    verdict = core.check_as_they_finish(never_ends, limit_s=5)
    expect(verdict, checking.WRONG, "had not returned after 5 s", "ready, pending = ray.wait(pending)")


@pytest.mark.cluster
def test_as_they_finish_passes_the_right_answer(on_ray):
    expect(core.check_as_they_finish(right), checking.DONE, "as they ended", "in the order of the items")


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


def test_the_tally_check_refuses_what_needs_no_cluster_to_tell():
    expect(core.check_tally(Untouched), checking.NOT_DONE)
    expect(core.check_tally(Plain), checking.WRONG, "plain class", "@ray.remote")
    expect(core.check_tally(a_task), checking.WRONG, "a task keeps nothing between calls")
    expect(core.check_tally(SharedCounts), checking.WRONG, "share their counts", "in `self`")
    expect(core.check_tally(GlobalCounts), checking.WRONG, "share their counts")
    expect(core.check_tally(Forgets), checking.WRONG, "gave {}", "in `self` between calls")
    expect(core.check_tally(WithoutRequest), checking.WRONG, "1 CPU (the default", "num_cpus=0")
    expect(core.check_tally(WithGpu), checking.WRONG, "needs no GPU")


@pytest.mark.cluster
def test_the_tally_check_runs_tallies_on_ray(on_ray):
    expect(core.check_tally(TotalNotPerLabel), checking.WRONG, "`add('cat')` answered")
    expect(core.check_tally(Tally), checking.DONE, "kept their own counts")
