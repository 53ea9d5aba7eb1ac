"""04b's checks: the wrong answers a learner writes are refused with a message that teaches; right ones pass. Both run
in this process, in a process group of one (no Ray cluster): each verdict comes in seconds."""

from __future__ import annotations

import tempfile

import pytest
import ray.train
import torch
import torch.distributed.checkpoint
from ray.train import Checkpoint
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.fsdp import fully_shard

from course.exercises import fsdp

# 04b.1 ---------------------------------------------------------------------------------------------------------------


def shard_right(model, lr):
    for block in model.encoder.layers:
        fully_shard(block)
    fully_shard(model)
    return torch.optim.AdamW(model.parameters(), lr=lr)


def shard_by_the_module_path(model, lr):
    for index in range(len(model.encoder.layers)):
        torch.distributed.fsdp.fully_shard(model.encoder.layers[index], reshard_after_forward=True)
    torch.distributed.fsdp.fully_shard(model)
    return torch.optim.AdamW(params=list(model.parameters()), lr=lr, weight_decay=0.0)


def shard_the_root_only(model, lr):
    fully_shard(model)
    return torch.optim.AdamW(model.parameters(), lr=lr)


def shard_the_blocks_only(model, lr):
    for block in model.encoder.layers:
        fully_shard(block)
    return torch.optim.AdamW(model.parameters(), lr=lr)


def shard_the_lessons_four_blocks(model, lr):
    for index in range(2):
        fully_shard(model.encoder.layers[index])
    fully_shard(model)
    return torch.optim.AdamW(model.parameters(), lr=lr)


def shard_the_lessons_twelve_blocks(model, lr):  # more blocks than the check's ViT has: an IndexError
    for index in range(12):
        fully_shard(model.encoder.layers[index])
    fully_shard(model)
    return torch.optim.AdamW(model.parameters(), lr=lr)


def optimizer_before_sharding(model, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    shard_right(model, lr)
    return optimizer


def shard_without_returning(model, lr):
    shard_right(model, lr)


def shard_the_blocks_as_one_unit(model, lr):
    fully_shard(list(model.encoder.layers))  # one unit for every block: gathered all at once
    fully_shard(model)
    return torch.optim.AdamW(model.parameters(), lr=lr)


def shard_with_sgd(model, lr):
    shard_right(model, lr)
    return torch.optim.SGD(model.parameters(), lr=lr)


@pytest.mark.parametrize("answer", [shard_right, shard_by_the_module_path])
def test_check_shard_accepts_a_unit_per_block_then_the_root(answer):
    verdict = fsdp.check_shard(answer)
    assert verdict.done, verdict.message
    assert not torch.distributed.is_initialized()  # the check's group of one is gone


@pytest.mark.parametrize(
    ("answer", "teaches"),
    [
        (shard_the_root_only, "gathers the whole model"),
        (shard_the_blocks_only, "stay whole on every rank"),
        (shard_the_lessons_four_blocks, "Loop over `model.encoder.layers`"),
        (shard_the_lessons_twelve_blocks, "IndexError: index 3 is out of range: the check's ViT has 3 blocks"),
        (optimizer_before_sharding, "Build the optimizer after sharding"),
        (shard_without_returning, "not an optimizer"),
        (shard_with_sgd, "`torch.optim.AdamW`"),
        (shard_the_blocks_as_one_unit, "the blocks became one unit together"),
    ],
)
def test_check_shard_refuses_with_a_message_that_teaches(answer, teaches):
    verdict = fsdp.check_shard(answer)
    assert not verdict.done
    assert teaches in verdict.message, verdict.message
    assert not torch.distributed.is_initialized()


def test_check_shard_says_not_done_for_the_untouched_exercise():
    def shard(model, lr):
        raise NotImplementedError

    assert fsdp.check_shard(shard).state == "not done yet"


# 04b.2 ---------------------------------------------------------------------------------------------------------------


def report_right(model, optimizer, metrics):
    model_state, optimizer_state = get_state_dict(model, optimizer)
    with tempfile.TemporaryDirectory() as folder:
        torch.distributed.checkpoint.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=folder)
        ray.train.report(metrics, checkpoint=Checkpoint.from_directory(folder))


def report_with_a_writer(model, optimizer, metrics):
    from torch.distributed.checkpoint import FileSystemWriter, save

    folder = tempfile.mkdtemp()
    state = dict(zip(("model", "optimizer"), get_state_dict(model, optimizer), strict=True))
    save(state, storage_writer=FileSystemWriter(folder))
    ray.train.report(dict(metrics), checkpoint=Checkpoint.from_directory(folder))


def report_saved_on_rank_0_only(model, optimizer, metrics):
    if ray.train.get_context().get_world_rank() == 0:
        report_right(model, optimizer, metrics)
    else:
        ray.train.report(metrics)


def report_checkpoint_of_rank_0_only(model, optimizer, metrics):
    model_state, optimizer_state = get_state_dict(model, optimizer)
    with tempfile.TemporaryDirectory() as folder:
        torch.distributed.checkpoint.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=folder)
        rank = ray.train.get_context().get_world_rank()
        ray.train.report(metrics, checkpoint=Checkpoint.from_directory(folder) if rank == 0 else None)


def report_saved_on_dist_rank_0_only(model, optimizer, metrics):  # the rank from torch, not from Ray Train
    if torch.distributed.get_rank() == 0:
        report_right(model, optimizer, metrics)
    else:
        ray.train.report(metrics)


def report_saved_on_env_rank_0_only(model, optimizer, metrics):  # the rank from the environment
    import os

    if os.environ.get("RANK", "0") == "0":
        report_right(model, optimizer, metrics)
    else:
        ray.train.report(metrics)


def report_torch_save(model, optimizer, metrics):
    model_state, optimizer_state = get_state_dict(model, optimizer)
    with tempfile.TemporaryDirectory() as folder:
        torch.save({"model": model_state, "optimizer": optimizer_state}, f"{folder}/state.pt")
        ray.train.report(metrics, checkpoint=Checkpoint.from_directory(folder))


def report_on_rank_0_only(model, optimizer, metrics):
    if ray.train.get_context().get_world_rank() == 0:
        report_right(model, optimizer, metrics)


def report_the_model_only(model, optimizer, metrics):
    model_state, _ = get_state_dict(model, optimizer)
    with tempfile.TemporaryDirectory() as folder:
        torch.distributed.checkpoint.save({"model": model_state}, checkpoint_id=folder)
        ray.train.report(metrics, checkpoint=Checkpoint.from_directory(folder))


@pytest.mark.parametrize("answer", [report_right, report_with_a_writer])
def test_check_report_sharded_accepts_a_dcp_save_and_a_report_on_every_rank(answer):
    verdict = fsdp.check_report_sharded(answer)
    assert verdict.done, verdict.message
    assert not torch.distributed.is_initialized()


@pytest.mark.parametrize(
    ("answer", "teaches"),
    [
        (report_saved_on_rank_0_only, "saved nothing and reported no checkpoint"),
        (report_saved_on_dist_rank_0_only, "saved nothing and reported no checkpoint"),
        (report_saved_on_env_rank_0_only, "saved nothing and reported no checkpoint"),
        (report_checkpoint_of_rank_0_only, "saved its shards but reported no checkpoint"),
        (report_torch_save, "`torch.save` of a sharded state dict"),
        (report_on_rank_0_only, "never called `ray.train.report`"),
        (report_the_model_only, "under the keys 'model' and 'optimizer'"),
    ],
)
def test_check_report_sharded_refuses_with_a_message_that_teaches(answer, teaches):
    verdict = fsdp.check_report_sharded(answer)
    assert not verdict.done
    assert teaches in verdict.message, verdict.message


def test_check_report_sharded_says_not_done_for_the_untouched_exercise():
    def report_sharded(model, optimizer, metrics):
        raise NotImplementedError

    assert fsdp.check_report_sharded(report_sharded).state == "not done yet"
