"""Lesson 05's checks (helpers.exercises.data_loading_playbook): the common wrong answers are refused with a
message that teaches, the right one passes."""

from __future__ import annotations

import numpy as np
import pytest
from exercise_checks import expect, results_here, todo  # noqa: F401  (results_here: an autouse fixture)
from ray.train import DataConfig

from helpers.exercises import (
    checking,
    data_loading_playbook,
)


@pytest.mark.cluster
def test_the_ray_data_checks():
    """05.1 runs Ray Data: on the test cluster, or a local Ray."""
    import ray

    from helpers.course.cluster import configure_ray_data, init_ray

    init_ray()
    configure_ray_data()  # preserve_order=True here; the check gives the answer the notebook's False, as in 05

    def in_order_blocks(ds):  # what section 6 says a repeatable order needs: each answer below but one has it
        ds.context.execution_options.preserve_order = True
        return ds

    check = data_loading_playbook.check_epoch_order
    in_order = lambda ds, epoch: in_order_blocks(ds).to_pandas()["id"].to_numpy()  # noqa: E731
    same_seed = lambda ds, epoch: in_order_blocks(ds).random_shuffle(seed=0).to_pandas()["id"].to_numpy()  # noqa: E731
    expect(check(in_order), checking.WRONG, "nothing was shuffled")
    expect(check(same_seed), checking.WRONG, "epochs 0 and 1 give the same order")
    no_seed = lambda ds, epoch: in_order_blocks(ds).random_shuffle().to_pandas()["id"].to_numpy()  # noqa: E731
    expect(check(no_seed), checking.WRONG, "every random step needs a seed")
    batches = lambda ds, epoch: [  # noqa: E731
        b["id"] for b in in_order_blocks(ds).random_shuffle(seed=epoch).iter_batches(batch_size=300)
    ]
    expect(check(batches), checking.WRONG, "parts (batches?)", "np.concatenate")

    def numpy_permutation(ds, epoch):  # repeatable and new every epoch, but shuffled on the driver
        ids = np.sort(ds.to_pandas()["id"].to_numpy())
        return ids[np.random.default_rng(epoch).permutation(len(ids))]

    expect(check(numpy_permutation), checking.WRONG, "not by Ray Data", "random_shuffle")

    def seed_only(ds, epoch):  # the likeliest half-right answer: seeded, but the blocks in the order they finish
        return np.concatenate([b["id"] for b in ds.random_shuffle(seed=epoch).iter_batches(batch_size=None)])

    found = check(seed_only)  # two runs may or may not have agreed: either way, refused, naming preserve_order
    assert found.state == checking.WRONG and "preserve_order" in found.message, found

    def right(ds, epoch):  # the solution's way: the order turned on for the shuffled dataset
        shuffled = ds.random_shuffle(seed=epoch)
        shuffled.context.execution_options.preserve_order = True
        return np.concatenate([b["id"] for b in shuffled.iter_batches(batch_size=None)])

    def right_locally(ds, epoch):  # another right one: a seeded local shuffle as the batches are read, blocks in order
        ds = in_order_blocks(ds)
        batches = ds.iter_batches(batch_size=200, local_shuffle_buffer_size=500, local_shuffle_seed=epoch)
        return np.concatenate([b["id"] for b in batches])

    expect(check(right), checking.DONE, "shuffled by Ray Data")
    expect(check(right_locally), checking.DONE, "shuffled by Ray Data")

    ray.shutdown()


def test_the_data_config_exercise_needs_no_ray_for_answers_of_another_shape():
    """05.2: a class that is no DataConfig, or a configure still untouched, gets its verdict before Ray starts."""

    class NotADataConfig:
        def __init__(self, valid_rows):
            self.valid_rows = valid_rows

        def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
            return [{} for _ in range(world_size)]

    import ray

    ray.shutdown()  # an earlier test's Ray (tests run in one process): this one asks whether the check starts it
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

    calls = []
    with data_loading_playbook._calls_recorded([(Data, "split")], calls):
        assert Data().split(3, equal=True) == [3, True]
        Data().split(2)
    assert calls == [("split", {"equal": True}), ("split", {})]
    Data().split(1)
    assert len(calls) == 2


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


@pytest.mark.cluster
def test_the_data_config_exercise():
    import ray

    from helpers.course.cluster import configure_ray_data, init_ray

    init_ray()
    configure_ray_data(preserve_order=False)  # as notebook 05

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

    class SameRowsForEveryone(QuickValidation):  # `valid` given whole: another right way to keep the rows alike
        def give_valid(self, ds, per_rank):
            rows = ray.data.from_items(ds.take(self.valid_rows))
            for worker in per_rank:
                worker["valid"] = rows.iterator()

    check = data_loading_playbook.check_quick_validation
    expect(check(UnequalShares), checking.WRONG, "without `equal=True`", "Pass `equal=True`")
    expect(check(SameRowsForEveryone), checking.DONE)
    expect(check(Untouched), checking.NOT_DONE)
    expect(check(TwoWorkers), checking.WRONG, "world_size=3", "one dict per worker")
    expect(check(LooksNamesUp), checking.WRONG, "KeyError", "once per dataset")
    expect(check(TheBuiltIn), checking.WRONG, "all 90 `test` rows", "every dataset but `valid`")
    expect(check(TrainOnly), checking.WRONG, "all 90 `test` rows")
    expect(check(SplitsValid), checking.WRONG, "different `valid` rows", "whole")
    expect(check(HundredRows), checking.WRONG, "all 60 `valid` rows")
    expect(check(Materializes), checking.WRONG, "called `split`", "streaming_split")
    expect(check(QuickValidation), checking.DONE, "every worker the same 25 `valid` rows")
    ray.shutdown()
