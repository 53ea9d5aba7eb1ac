"""Lesson 05's checks (course.exercises.data_loading_playbook): the common wrong answers are refused with a
message that teaches, other right answers pass.

The wrong answers a learner who half understands writes, each a case below:

05.1 `epoch_order(ds, epoch)` (the ids shuffled by Ray Data, the same order for the same epoch, a new one each epoch):
  - the ids in order (nothing shuffled); the same seed for every epoch; no seed at all; a local shuffle without
    `local_shuffle_seed`;
  - the batches returned as a list instead of one array; a permutation made with numpy on the driver;
  - a seed, but the blocks read in the order they finish (`preserve_order` left off, this notebook's setting), or
    turned on in `DataContext.get_current()` after the dataset was made (the dataset keeps its own copy);
  - only the blocks moved (`randomize_block_order(seed=epoch)`): the rows inside each block keep their order.
05.2 `QuickValidation(valid_rows=n)`, a `DataConfig` (every dataset split equally between the workers, except
`valid`: every worker the same n rows, whole):
  - not a `DataConfig`; `__init__` without `valid_rows`; the lesson's built-in `DataConfig(datasets_to_split=...)`;
  - only `train` split (a dataset of another name given whole); `streaming_split` without `equal=True`; `ds.split`
    (every share computed first); the lesson's 2 workers written in; the datasets looked up by name (Ray Train calls
    `configure` once per dataset);
  - `valid` split between the workers; `valid` given whole, every row; the notebook's 100 rows written in;
  - `valid` limited lazily, each worker's iterator running the `limit` again (the same rows only by luck, with
    `preserve_order=False`); a limited copy made once per worker. Before issue 43 the check gave these a ✓.
"""

from __future__ import annotations

import numpy as np
import pytest
from exercise_checks import expect, leave_ray
from ray.train import DataConfig

from course.exercises import (
    checking,
    data_loading_playbook,
)

# --- without Ray (these tests run first: they shut an earlier test's Ray down) ----------------------------------------


def test_the_data_config_exercise_needs_no_ray_for_answers_of_another_shape():
    """05.2: a class that is no DataConfig, or a configure still untouched, gets its verdict before Ray starts."""

    class NotADataConfig:
        def __init__(self, valid_rows):
            self.valid_rows = valid_rows

        def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
            return [{} for _ in range(world_size)]

    import ray

    leave_ray()  # an earlier test's Ray (tests run in one process): this one asks whether the check starts it
    check = data_loading_playbook.check_quick_validation
    expect(check(NotADataConfig), checking.WRONG, "NotADataConfig", "subclass it")
    expect(check(lambda valid_rows: None), checking.WRONG, "NoneType", "DataConfig")

    class NoValidRows(DataConfig):  # `__init__` without the argument the exercise makes it with
        def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
            raise NotImplementedError

    expect(check(NoValidRows), checking.WRONG, "it raised TypeError", "valid_rows")
    assert not ray.is_initialized(), "the check started Ray for an answer it refuses without it"


def test_the_recorder_sees_options_given_by_keyword():
    """What 05's checks read of a call: its name and its keyword options; the method is whole again afterwards."""

    class Data:
        def split(self, n, *, equal=False):
            return [n, equal]

        def take(self, n):
            return self.split(n)

    calls = []
    with data_loading_playbook._calls_recorded([(Data, "split")], calls):
        assert Data().split(3, equal=True) == [3, True]
        Data().split(2)
    assert calls == [("split", {"equal": True}), ("split", {})]
    Data().split(1)
    assert len(calls) == 2
    outermost = []
    with data_loading_playbook._calls_recorded([(Data, "split"), (Data, "take")], outermost, outermost=True):
        Data().take(4)  # its own call of split is not counted
        Data().split(5)
    assert outermost == [("take", {}), ("split", {})]


def test_an_answer_that_should_be_one_array_of_ids():
    """05.1's answer, whatever its shape: a list of batches is named as such (np.asarray raised ValueError)."""
    batches = [np.arange(0, 3), np.arange(3, 5)]
    with pytest.raises(AssertionError, match="2 parts"):
        data_loading_playbook._ids(batches)
    with pytest.raises(AssertionError, match="one flat array"):
        data_loading_playbook._ids(np.zeros((2, 2)))
    with pytest.raises(AssertionError, match="one flat array"):
        data_loading_playbook._ids(None)
    assert data_loading_playbook._ids([4, 2, 3]).tolist() == [4, 2, 3]


# --- on Ray ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_here():
    """One Ray for this module's cluster tests (on the test cluster, or a local runtime), set as notebook 05 sets it."""

    from course.cluster import configure_ray_data, init_ray

    init_ray()
    configure_ray_data(preserve_order=False)  # as notebook 05; the checks give their datasets this setting anyway
    yield
    leave_ray()


def in_order_blocks(ds):  # what section 6 says a repeatable order needs: most answers below have it
    ds.context.execution_options.preserve_order = True
    return ds


def ids_of(ds, **options):
    return np.concatenate([b["id"] for b in ds.iter_batches(batch_size=250, **options)])


def numpy_permutation(ds, epoch):  # repeatable and new every epoch, but shuffled on the driver
    ids = np.sort(ds.to_pandas()["id"].to_numpy())
    return ids[np.random.default_rng(epoch).permutation(len(ids))]


def order_on_for_the_process(ds, epoch):  # preserve_order turned on after ds was made: ds keeps its own copy
    import ray.data

    ray.data.DataContext.get_current().execution_options.preserve_order = True
    try:
        return ids_of(ds.random_shuffle(seed=epoch))
    finally:
        ray.data.DataContext.get_current().execution_options.preserve_order = False


EPOCH_ORDER_WRONG = {
    "in order": (lambda ds, epoch: ids_of(in_order_blocks(ds)), ["nothing was shuffled"]),
    "the same seed every epoch": (
        lambda ds, epoch: ids_of(in_order_blocks(ds).random_shuffle(seed=0)),
        ["epochs 0 and 1 give the same order", "depend on the epoch"],
    ),
    "no seed": (lambda ds, epoch: ids_of(in_order_blocks(ds).random_shuffle()), ["every random step needs a seed"]),
    "a local shuffle without its seed": (
        lambda ds, epoch: ids_of(in_order_blocks(ds), local_shuffle_buffer_size=500),
        ["every random step needs a seed", "local_shuffle_seed"],
    ),
    "the batches as a list": (
        lambda ds, epoch: [b["id"] for b in in_order_blocks(ds).random_shuffle(seed=epoch).iter_batches()],
        ["parts (batches?)", "np.concatenate"],
    ),
    "a numpy permutation": (numpy_permutation, ["not by Ray Data", "random_shuffle"]),
    # seeded, the blocks in the order they finish: two runs may or may not have agreed; either way, refused
    "a seed, preserve_order left off": (lambda ds, epoch: ids_of(ds.random_shuffle(seed=epoch)), ["preserve_order"]),
    "preserve_order on for the process only": (order_on_for_the_process, ["preserve_order"]),
    "only the blocks moved": (
        lambda ds, epoch: ids_of(in_order_blocks(ds).randomize_block_order(seed=epoch)),
        ["the ids come in runs", "Only whole blocks moved", "a local shuffle"],
    ),
}


@pytest.mark.cluster
@pytest.mark.parametrize("answer, phrases", EPOCH_ORDER_WRONG.values(), ids=EPOCH_ORDER_WRONG.keys())
def test_the_shuffle_exercise_refuses(ray_here, answer, phrases):
    expect(data_loading_playbook.check_epoch_order(answer), checking.WRONG, *phrases)


def right_shuffle(ds, epoch):  # the solution's way: the order turned on for the shuffled dataset
    shuffled = ds.random_shuffle(seed=epoch)
    shuffled.context.execution_options.preserve_order = True
    return ids_of(shuffled)


EPOCH_ORDER_RIGHT = {
    "random_shuffle, its order on": right_shuffle,
    "a seeded local shuffle": lambda ds, epoch: ids_of(
        in_order_blocks(ds), local_shuffle_buffer_size=500, local_shuffle_seed=epoch
    ),
    "block order and a local shuffle": lambda ds, epoch: ids_of(  # section 10's recipe, both seeded
        in_order_blocks(ds).randomize_block_order(seed=epoch), local_shuffle_buffer_size=500, local_shuffle_seed=epoch
    ),
}


@pytest.mark.cluster
@pytest.mark.parametrize("answer", EPOCH_ORDER_RIGHT.values(), ids=EPOCH_ORDER_RIGHT.keys())
def test_the_shuffle_exercise_accepts(ray_here, answer):
    expect(data_loading_playbook.check_epoch_order(answer), checking.DONE, "shuffled by Ray Data")


class QuickValidation(DataConfig):
    """05.2's right answer; the wrong ones below change one thing of it."""

    def __init__(self, valid_rows: int) -> None:
        super().__init__()
        self.valid_rows = valid_rows

    def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
        per_rank = [{} for _ in range(world_size)]
        for name, ds in datasets.items():
            if name == "valid":
                self.give_valid(ds, per_rank)
            else:
                self.split(name, ds, per_rank)
        return per_rank

    def give_valid(self, ds, per_rank):
        first = ds.limit(self.valid_rows).materialize()
        for worker in per_rank:
            worker["valid"] = first.iterator()

    def split(self, name, ds, per_rank):
        for worker, shard in zip(per_rank, ds.streaming_split(len(per_rank), equal=True), strict=True):
            worker[name] = shard


class Untouched(QuickValidation):
    def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
        raise NotImplementedError


class TheBuiltIn(DataConfig):  # the lesson's own answer to another question: valid whole, all of it
    def __init__(self, valid_rows):
        super().__init__(datasets_to_split=["train"])


class TrainOnly(QuickValidation):  # splits `train` by name, gives every other dataset whole
    def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
        per_rank = [{} for _ in range(world_size)]
        for name, ds in datasets.items():
            if name == "train":
                self.split(name, ds, per_rank)
            elif name == "valid":
                self.give_valid(ds, per_rank)
            else:
                for worker in per_rank:
                    worker[name] = ds.iterator()
        return per_rank


class SplitsValid(QuickValidation):  # a share of the limited validation set per worker
    def give_valid(self, ds, per_rank):
        for worker, shard in zip(per_rank, ds.limit(self.valid_rows).streaming_split(len(per_rank)), strict=True):
            worker["valid"] = shard


class ValidWhole(QuickValidation):  # every row of `valid` to every worker: `valid_rows` forgotten
    def give_valid(self, ds, per_rank):
        for worker in per_rank:
            worker["valid"] = ds.iterator()


class HundredRows(QuickValidation):  # the notebook's example value, written in
    def give_valid(self, ds, per_rank):
        first = ds.limit(100).materialize()
        for worker in per_rank:
            worker["valid"] = first.iterator()


class LooksNamesUp(QuickValidation):  # as if `configure` got every dataset at once
    def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
        per_rank = [{} for _ in range(world_size)]
        self.split("train", datasets["train"], per_rank)
        self.give_valid(datasets["valid"], per_rank)
        return per_rank


class Materializes(QuickValidation):  # ds.split: every share computed and held before training starts
    def split(self, name, ds, per_rank):
        for worker, shard in zip(per_rank, ds.split(len(per_rank), equal=True), strict=True):
            worker[name] = shard.iterator()


class TwoWorkers(QuickValidation):  # the lesson's number of workers, written in
    def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
        return super().configure(datasets, 2, worker_handles, worker_node_ids)


class UnequalShares(QuickValidation):  # streaming_split without equal=True: shares of whole blocks
    def split(self, name, ds, per_rank):
        for worker, shard in zip(per_rank, ds.streaming_split(len(per_rank)), strict=True):
            worker[name] = shard


class LazyLimit(QuickValidation):  # the limit kept lazy: each worker's iterator runs it again
    def give_valid(self, ds, per_rank):
        first = ds.limit(self.valid_rows)
        for worker in per_rank:
            worker["valid"] = first.iterator()


class CopyPerWorker(QuickValidation):  # a limited copy made once per worker: each may hold other rows
    def give_valid(self, ds, per_rank):
        for worker in per_rank:
            worker["valid"] = ds.limit(self.valid_rows).materialize().iterator()


class SameRowsForEveryone(QuickValidation):  # `valid`'s rows taken once, given whole: another right way
    def give_valid(self, ds, per_rank):
        import ray.data

        rows = ray.data.from_items(ds.take(self.valid_rows))
        for worker in per_rank:
            worker["valid"] = rows.iterator()


class OrderedLimit(QuickValidation):  # a lazy limit on a dataset read in order: the first rows every time, right
    def give_valid(self, ds, per_rank):
        first = ds.limit(self.valid_rows)
        first.context.execution_options.preserve_order = True
        for worker in per_rank:
            worker["valid"] = first.iterator()


DATA_CONFIG_WRONG = {
    "streaming_split without equal": (UnequalShares, ["without `equal=True`", "Pass `equal=True`"]),
    "the lesson's 2 workers": (TwoWorkers, ["world_size=3", "one dict per worker"]),
    "datasets looked up by name": (LooksNamesUp, ["KeyError", "once per dataset"]),
    "the built-in DataConfig": (TheBuiltIn, ["all 90 `test` rows", "every dataset but `valid`"]),
    "train split by name only": (TrainOnly, ["all 90 `test` rows"]),
    "valid split": (SplitsValid, ["different `valid` rows", "whole"]),
    "valid whole, every row": (ValidWhole, ["all 60 `valid` rows", "valid_rows=25"]),
    "100 rows written in": (HundredRows, ["all 60 `valid` rows"]),
    "ds.split": (Materializes, ["called `split`", "streaming_split"]),
    "a lazy limit": (LazyLimit, ["runs `limit` again", "preserve_order=False", "Keep one limited copy"]),
    "a copy per worker": (CopyPerWorker, ["ran it 3 times", "`materialize`", "once, before the loop"]),
}


@pytest.mark.cluster
@pytest.mark.parametrize("answer, phrases", DATA_CONFIG_WRONG.values(), ids=DATA_CONFIG_WRONG.keys())
def test_the_data_config_exercise_refuses(ray_here, answer, phrases):
    expect(data_loading_playbook.check_quick_validation(answer), checking.WRONG, *phrases)


@pytest.mark.cluster
@pytest.mark.parametrize("answer", [QuickValidation, SameRowsForEveryone, OrderedLimit], ids=lambda c: c.__name__)
def test_the_data_config_exercise_accepts(ray_here, answer):
    expect(data_loading_playbook.check_quick_validation(answer), checking.DONE, "every worker the same 25 `valid` rows")


@pytest.mark.cluster
def test_the_data_config_exercise_not_done(ray_here):
    expect(data_loading_playbook.check_quick_validation(Untouched), checking.NOT_DONE)


@pytest.mark.cluster
def test_the_ray_data_internals_that_find_a_lazy_limit_are_still_there(ray_here):
    """05.2's check finds a lazy ``limit`` in an iterator's plan through Ray Data internals (written for Ray 2.60: a
    ``DataIterator``'s ``_base_dataset``, its ``_logical_plan.dag``, the ``Limit`` and ``InputData`` operators). If an
    upgrade moves them, the check says nothing of that rule rather than something wrong: this test says so first."""
    import ray.data

    def unordered(ds):
        ds.context.execution_options.preserve_order = False
        return ds

    lazy = unordered(ray.data.range(100, override_num_blocks=4).map_batches(lambda batch: batch).limit(5))
    kept = unordered(ray.data.range(100, override_num_blocks=4).map_batches(lambda batch: batch).materialize().limit(5))
    assert data_loading_playbook._limited_again(lazy.iterator()), "a lazy limit over a map_batches is not found"
    assert not data_loading_playbook._limited_again(kept.iterator()), "a limit over rows kept once is found"
    assert not data_loading_playbook._limited_again(in_order_blocks(lazy).iterator())
