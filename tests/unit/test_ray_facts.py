"""What a lesson says about Ray's rules, held on the installed release: when an upgrade changes a rule, the test names
the lesson whose text to review. Fast: nothing starts Ray."""

from __future__ import annotations

from types import SimpleNamespace

from ray.train import FailureConfig
from ray.train.v2._internal.exceptions import WorkerGroupStartupFailedError, WorkerGroupStartupTimeoutError
from ray.train.v2._internal.execution.failure_handling.default import DefaultFailurePolicy
from ray.train.v2._internal.execution.failure_handling.failure_policy import FailureDecision
from ray.train.v2.api.exceptions import ControllerError, PreemptionError, WorkerGroupError

RETRY, RAISE = FailureDecision.RETRY, FailureDecision.RAISE


def test_02b_three_failure_budgets_each_charged_by_its_own_kind_of_failure():
    """02b, section 3: `max_failures` (default 0) is spent by a worker group's failures, a preemption spends
    `max_preemption_failures` (default without limit), a worker group that could not start spends
    `controller_failure_limit` (default without limit), and any other controller error raises at once."""
    assert (FailureConfig().max_failures, FailureConfig().max_preemption_failures) == (0, -1)
    assert FailureConfig().controller_failure_limit == -1
    policy = DefaultFailurePolicy(FailureConfig(max_failures=1))
    preempted = PreemptionError(SimpleNamespace(preempted_ranks=[1]))
    for _ in range(5):  # neither spends max_failures
        assert policy.make_decision(preempted) == RETRY
        assert policy.make_decision(ControllerError(WorkerGroupStartupTimeoutError(2))) == RETRY
    assert policy.make_decision(ControllerError(WorkerGroupStartupFailedError("no node"))) == RETRY
    died = WorkerGroupError("worker 1 died", {1: RuntimeError("its process exited")})
    assert [policy.make_decision(died) for _ in range(2)] == [RETRY, RAISE]  # one restart, then fit() raises
    assert DefaultFailurePolicy(FailureConfig()).make_decision(died) == RAISE  # the default: no restart
    assert policy.make_decision(ControllerError(ValueError("a bug in the controller"))) == RAISE


def test_05_and_04_a_local_shuffle_buffer_gives_its_first_batch_at_one_and_a_half_buffers_and_a_batch(monkeypatch):
    """05, section 5, and 04's Ray Data step: `local_shuffle_buffer_size` rows are not enough for the first batch;
    Ray Data's ShufflingBatcher waits for 1.5 times the buffer plus a batch (05: 3,500 rows, four blocks of 1,000)."""
    import pyarrow as pa
    from ray.data._internal import batcher

    monkeypatch.setattr(batcher, "get_total_obj_store_mem_on_node", lambda: 2**30)  # it would start Ray to ask
    assert batcher.SHUFFLE_BUFFER_COMPACTION_RATIO == 1.5
    shuffler = batcher.ShufflingBatcher(batch_size=500, shuffle_buffer_min_size=2000, shuffle_seed=1)
    rows = 0
    while not shuffler.has_batch():
        shuffler.add(pa.table({"id": list(range(rows, rows + 1000))}))
        rows += 1000
    assert rows == 4000  # the first block count at which rows - 500 >= 1.5 x 2,000
