"""The "Your turn" checks of notebook 05 (the data-loading playbook) (rules: ``course.exercises.checking``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from course.deadline import first_line
from course.exercises.checking import Raised, Verdict, attach_ray, attempt, check, untouched


@contextlib.contextmanager
def _calls_recorded(methods: list[tuple[type, str]], calls: list[tuple[str, dict]], outermost: bool = False):
    """In the block, every call of the ``(class, method name)`` pairs is appended to ``calls`` as ``(name,
    keyword arguments)``; the methods are restored afterwards. How a check sees which Ray Data steps an answer
    asked for, whatever it returns. ``outermost``: not the calls these methods make of each other (``take`` reads
    rows with ``iter_rows``)."""
    originals = [(cls, name, cls.__dict__[name]) for cls, name in methods if name in cls.__dict__]
    depth = threading.local()

    def recording(name: str, method: Callable) -> Callable:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            inside = getattr(depth, "n", 0)
            if not (outermost and inside):
                calls.append((name, dict(kwargs)))
            depth.n = inside + 1
            try:
                return method(*args, **kwargs)
            finally:
                depth.n = inside

        return recorded

    for cls, name, method in originals:
        setattr(cls, name, recording(name, method))
    try:
        yield calls
    finally:
        for cls, name, method in originals:
            setattr(cls, name, method)


READS = ("iter_batches", "iter_torch_batches", "iter_rows", "to_pandas", "to_numpy", "take_all", "take")


@contextlib.contextmanager
def _reads_recorded(in_order: list[bool]):
    """In the block, every read of a ``Dataset``'s rows (:data:`READS`) appends whether that dataset's blocks come
    out in order (its context's ``preserve_order`` at that moment) to ``in_order``; restored afterwards."""
    from ray.data import Dataset

    originals = [(name, Dataset.__dict__[name]) for name in READS if name in Dataset.__dict__]

    def recording(method: Callable) -> Callable:
        def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
            in_order.append(bool(self.context.execution_options.preserve_order))
            return method(self, *args, **kwargs)

        return recorded

    for name, method in originals:
        setattr(Dataset, name, recording(method))
    try:
        yield in_order
    finally:
        for name, method in originals:
            setattr(Dataset, name, method)


def _ids(found: Any) -> np.ndarray:
    """An answer that should be one array of ids, as one: an AssertionError that says what it is otherwise."""
    if isinstance(found, list | tuple) and found and all(isinstance(part, np.ndarray | list | dict) for part in found):
        raise AssertionError(
            f"it returned a {type(found).__name__} of {len(found)} parts (batches?): return one numpy array of all "
            "the ids, in order (`np.concatenate` the batches' `id` columns)"
        )
    try:
        ids = np.asarray(found)
    except (ValueError, TypeError) as error:
        raise AssertionError(
            f"it returned {type(found).__name__}, which is not an array of ids ({first_line(error)}): return one "
            "numpy array of the ids"
        ) from None
    assert ids.ndim == 1 and ids.dtype.kind in "iu", (
        f"it returned an array of shape {ids.shape} and type {ids.dtype}: return one flat array of the integer ids"
    )
    return ids


def check_epoch_order(epoch_order: Callable[[Any, int], np.ndarray]) -> Verdict:
    """05.1: ``epoch_order(ds, epoch)``: a shuffled order of the ids, the same on every run, new every epoch, shuffled
    by Ray Data itself (a seeded ``random_shuffle``, or a seeded local shuffle as the batches are read)."""
    import ray.data
    from ray.data import DataIterator, Dataset

    watched = [(Dataset, "random_shuffle"), (Dataset, "randomize_block_order")]
    watched += [(cls, name) for cls in (Dataset, DataIterator) for name in ("iter_batches", "iter_torch_batches")]

    def shuffled_by_ray(calls: list[tuple[str, dict]]) -> bool:
        return any(
            name in ("random_shuffle", "randomize_block_order") or kwargs.get("local_shuffle_buffer_size")
            for name, kwargs in calls
        )

    def run() -> str:
        attach_ray()
        context = ray.data.DataContext.get_current()
        kept = context.execution_options.preserve_order
        context.execution_options.preserve_order = False  # the notebook's setting (its section 1): ds gets a copy
        try:
            ds = ray.data.range(2000, override_num_blocks=10)
        finally:
            context.execution_options.preserve_order = kept
        calls: list[tuple[str, dict]] = []
        in_order: list[bool] = []  # for each read of a dataset's rows: did its blocks come out in order?
        with _calls_recorded(watched, calls), _reads_recorded(in_order):
            first, again, other = (_ids(attempt(epoch_order, ds, epoch)) for epoch in (0, 0, 1))
        assert sorted(first.tolist()) == list(range(2000)), (
            f"{len(first)} ids, {len(set(first.tolist()))} distinct: every id once, in some order"
        )
        assert not np.array_equal(first, np.arange(2000)), "the ids come back in order: nothing was shuffled"
        neighbours = int((np.diff(first) == 1).sum())  # ids that follow the one before them, as in the dataset
        assert neighbours < len(first) // 2, (
            f"the ids come in runs: {neighbours} of {len(first) - 1} follow the id before them, as in the dataset. "
            "Only whole blocks moved (`randomize_block_order`); the rows inside each block kept their order. "
            "Shuffle the rows too: a local shuffle as the batches are read, seeded by the epoch, or a full "
            "`random_shuffle` (section 5 compares them)"
        )
        assert np.array_equal(first, again), (
            "two runs of epoch 0 gave different orders: every random step needs a seed (`random_shuffle(seed=)`, "
            "`local_shuffle_seed`), and the blocks must come out in order (`preserve_order`, section 6)"
        )
        assert not np.array_equal(first, other), "epochs 0 and 1 give the same order: let the seed depend on the epoch"
        assert shuffled_by_ray(calls), (
            "the order is shuffled, but not by Ray Data: a permutation made on the driver (numpy) needs every id "
            "there first, which a real dataset does not fit. Shuffle with Ray Data, seeded by the epoch: "
            "`ds.random_shuffle(seed=...)`, or a local shuffle as the batches are read (`local_shuffle_buffer_size`, "
            "`local_shuffle_seed`)"
        )
        assert all(in_order), (
            "the same order came back twice here, but by luck: the dataset was read with `preserve_order=False` "
            "(this notebook's setting), so its blocks come out in the order they finish, which changes with the "
            "cluster's load. Keep the seed, and turn the order on for this dataset (section 6): "
            "`shuffled.context.execution_options.preserve_order = True`"
        )
        return "the same shuffled order for the same epoch, another one for the next epoch, shuffled by Ray Data"

    return check("05.1", run, limit_s=240, ray_first=lambda: not untouched(epoch_order))


def _ids_per_worker(iterators: list, timeout_s: float = 120) -> list[np.ndarray]:
    """The ``id``s each worker's iterator yields, read at once in threads as Ray Train's workers read theirs."""

    def read(iterator: Any) -> np.ndarray:
        batches = [np.asarray(batch["id"]) for batch in iterator.iter_batches(batch_size=None)]
        return np.concatenate([*batches, np.empty(0, int)])

    pool = ThreadPoolExecutor(len(iterators))
    try:
        futures = [pool.submit(read, iterator) for iterator in iterators]
        return [future.result(timeout=timeout_s) for future in futures]
    except TimeoutError:
        raise AssertionError(
            f"reading the workers' iterators did not end within {timeout_s:.0f} s: does every worker have an "
            "iterator of its own (one per split of `streaming_split`, or `ds.iterator()`)?"
        ) from None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


MATERIALIZING = ("split", "split_at_indices", "split_proportionately", "materialize")  # 05.2: not for a split
# 05.2: the calls that run a dataset in `configure`: `valid`'s limited copy is run once, whatever the workers
RUNNING = ("materialize", "take", "take_all", "take_batch", "to_pandas", "iter_rows", "iter_batches")


def _limited_again(iterator: Any) -> bool:
    """True when ``iterator`` (``ds.iterator()``) runs a ``limit`` of its own each time it is read, over steps that run
    again too (a read, a ``map_batches``), on a dataset whose blocks come out in the order they finish
    (``preserve_order=False``): each worker's iterator may then get other rows. False for a limit over rows kept once
    (``materialize()``, ``from_items``), an ordered dataset, or another iterator."""
    from course.internals import InputData, Limit  # Ray Data internals: an entry of course.internals

    def upstream(operator: Any) -> list:
        found, todo = [], list(operator.input_dependencies)
        while todo:
            found.append(todo.pop())
            todo.extend(found[-1].input_dependencies)
        return found

    dataset = getattr(iterator, "_base_dataset", None)
    try:
        if dataset is None or dataset.context.execution_options.preserve_order:
            return False
        dag = dataset._logical_plan.dag
        limits = [op for op in [dag, *upstream(dag)] if isinstance(op, Limit)]
        return any(not isinstance(op, InputData) for limit in limits for op in upstream(limit))
    except Exception:  # noqa: BLE001  (Ray Data's internals changed: say nothing rather than something wrong)
        return False


def check_quick_validation(config_class: type) -> Verdict:
    """05.2: ``config_class(valid_rows=n)`` is a DataConfig whose ``configure`` splits every dataset equally between
    the workers, except ``valid``: every worker gets the same ``n`` rows of it, whole."""
    import ray
    import ray.data
    from ray.data import DataIterator, Dataset
    from ray.train import DataConfig

    def configured(config: Any, name: str, ds: Any, world_size: int) -> list:
        """What Ray Train does with ``config``: ``configure`` once per dataset, with a one-entry dict."""
        node = ray.get_runtime_context().get_node_id()
        calls: list[tuple[str, dict]] = []
        splits: list[tuple[str, dict]] = []  # streaming_split, with its options
        runs: list[tuple[str, dict]] = []  # every run of a dataset (its outermost call)
        try:
            with (
                _calls_recorded([(Dataset, method) for method in MATERIALIZING], calls),
                _calls_recorded([(Dataset, "streaming_split")], splits),
                _calls_recorded([(Dataset, method) for method in RUNNING], runs, outermost=True),
            ):
                per_worker = attempt(config.configure, {name: ds}, world_size, None, [node] * world_size)
        except Raised as raised:
            hint = ""
            if "KeyError" in str(raised):
                hint = (
                    ": Ray Train calls `configure` once per dataset, with a one-entry `datasets` dict; loop over "
                    "`datasets.items()` instead of looking names up"
                )
            raise AssertionError(f"called for the `{name}` dataset, `configure` failed: {raised}{hint}") from None
        assert isinstance(per_worker, list | tuple) and len(per_worker) == world_size, (
            f"`configure` returned {type(per_worker).__name__} "
            f"{'of ' + str(len(per_worker)) if hasattr(per_worker, '__len__') else ''} for world_size={world_size}: "
            "return a list with one dict per worker, `world_size` of them"
        )
        assert name == "valid" or not calls, (
            f"`configure` for the `{name}` dataset called `{calls[0][0] if calls else ''}`: that runs the whole "
            "dataset and holds every row in Ray's object store before the first step; `ds.streaming_split(world_size, "
            "equal=True)` hands each worker its share as the rows are produced"
        )
        iterators = [worker.get(name) if isinstance(worker, dict) else None for worker in per_worker]
        for rank, iterator in enumerate(iterators):
            assert isinstance(iterator, DataIterator), (
                f"worker {rank}'s `{name}` is {type(iterator).__name__}: each worker's dict maps the dataset's name "
                "to an iterator, `ds.iterator()` (the whole dataset) or one of `ds.streaming_split(...)` (a share)"
            )
        rows = _ids_per_worker(iterators)
        if name == "valid" and len(runs) > 1:
            alike = all(sorted(r.tolist()) == sorted(rows[0].tolist()) for r in rows)
            raise AssertionError(
                f"`configure` for the `valid` dataset ran it {len(runs)} times (`{runs[0][0]}`, once per worker?): "
                "each run of a `limit` on a dataset read with `preserve_order=False` (this notebook's setting) keeps "
                "the first rows to come out, in the order its blocks finish, and that order changes from run to run "
                f"(the workers got {'the same rows this time, by luck' if alike else 'different rows'}). Make the "
                "limited copy once, before the loop over the workers, and give each worker an iterator of it"
            )
        if name == "valid" and any(_limited_again(iterator) for iterator in iterators):
            alike = all(sorted(r.tolist()) == sorted(rows[0].tolist()) for r in rows)
            raise AssertionError(
                "each worker's `valid` iterator runs `limit` again, on a lazy dataset read with `preserve_order=False` "
                "(this notebook's setting): each iterator takes the first rows to come out, in the order its blocks "
                "finish, and that order changes from run to run (the workers got "
                f"{'the same rows this time, by luck' if alike else 'different rows'}). Keep one limited copy, "
                "computed once, and give every worker an iterator of that copy"
            )
        unequal = [options for _, options in splits if not options.get("equal")]
        assert name == "valid" or not unequal, (
            f"`configure` for the `{name}` dataset called `streaming_split` without `equal=True`: the workers got "
            f"{[len(r) for r in rows]} rows this time, but without it the shares may differ by whole blocks. Then, "
            "with `prepare_model` (DDP), a worker with one more batch waits in its gradient sync for workers that "
            "have ended the epoch, and the run hangs. Pass `equal=True`, as Ray Train's own `DataConfig` does"
        )
        return rows

    def run() -> str:
        workers = 3  # not the lesson's 2
        config = attempt(config_class, valid_rows=25)
        assert isinstance(config, DataConfig), (
            f"it made a {type(config).__name__}: `TorchTrainer(dataset_config=...)` takes a DataConfig, so subclass it"
        )
        attach_ray()
        context = ray.data.DataContext.get_current()
        kept = context.execution_options.preserve_order
        context.execution_options.preserve_order = False  # the notebook's setting (its section 1): valid gets a copy
        try:
            valid = ray.data.range(60, override_num_blocks=6).map_batches(lambda b: {"id": b["id"] + 1000})
        finally:
            context.execution_options.preserve_order = kept
        for name, size in (("train", 300), ("test", 90)):  # `test`: a dataset the exercise never named
            rows = configured(config, name, ray.data.range(size), workers)
            counts = [len(r) for r in rows]
            assert not all(count == size for count in counts), (
                f"every worker got all {size} `{name}` rows: every dataset but `valid` is split between the workers "
                "(`ds.streaming_split(world_size, equal=True, ...)`, one shard per worker)"
            )
            assert sorted(np.concatenate(rows).tolist()) == list(range(size)), (
                f"the {workers} workers' `{name}` shards hold {sum(counts)} rows for {size} in the dataset: every row "
                "goes to exactly one worker"
            )
            assert len(set(counts)) == 1, (
                f"the workers got {counts} `{name}` rows: ask for equal shares (`equal=True`), or the workers take "
                "different numbers of steps and wait for each other"
            )
        rows = configured(config, "valid", valid, workers)
        counts = [len(r) for r in rows]
        assert not all(count == 60 for count in counts), (
            "every worker got all 60 `valid` rows: keep `valid_rows` of them (the config was made with `valid_rows=25`)"
        )
        sets = [sorted(r.tolist()) for r in rows]
        assert all(s == sets[0] for s in sets), (
            f"the workers got different `valid` rows ({counts} rows): every worker evaluates on the same rows, "
            "whole (`.iterator()` of one limited dataset), not on a share"
        )
        assert counts[0] == 25 and len(set(sets[0])) == 25 and set(sets[0]) <= set(range(1000, 1060)), (
            f"each worker got {counts[0]} `valid` rows, the config was made with `valid_rows=25`: use the value "
            "kept in `__init__`, not a number of your own"
        )
        return (
            f"on {workers} workers: `train` and an unseen `test` split equally, every worker the same 25 `valid` "
            "rows, whole"
        )

    return check(
        "05.2",
        run,
        limit_s=120,  # a right answer takes seconds (6 s on a loaded 2-core machine): a hang is told in 2 min, not 5
        late="Look for a loop in your `configure` that never ends, or a wait on something that never comes",
        ray_first=lambda: (
            isinstance(config_class, type)
            and issubclass(config_class, DataConfig)
            and not untouched(config_class.configure)
        ),
    )
