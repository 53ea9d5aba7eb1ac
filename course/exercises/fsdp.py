"""The "Your turn" checks of notebook 04b (FSDP2 on Ray Train) (rules: ``course.exercises.checking``).

Both run the learner's code in this process, in a process group of one (Gloo over an in-memory ``HashStore``, its
socket on loopback), on a ViT of the check's own shape: ``fully_shard`` and DCP run there as on every rank of a
real group.

- 04b.1 hands the learner's ``shard(model, lr)`` a fresh ViT, then looks at which modules became FSDP2 units
  (``FSDPModule``), whether the optimizer holds the sharded parameters, and trains a step.
- 04b.2 runs the learner's ``report_sharded(model, optimizer, metrics)`` in Ray Train's local mode, as rank 1 of 2 and
  then as rank 0 of 2 (``course.internals.pretend_local_world``), keeps the checkpoints it reports, and loads rank 0's
  into a fresh sharded model. A rank is told by ``ray.train.get_context()``, as the lesson does; ``RANK`` and
  ``torch.distributed.get_rank()`` say the same while the learner's code runs (:func:`pretend_rank`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from course.exercises.checking import NotDone, Raised, Verdict, attempt, check, untouched
from course.exercises.train_runs import Kept, LocalLate, Reports, fit_locally, raised_locally, run_watched

CHECK_LIMIT_S = 30
LOCAL_RUN_LIMIT_S = 12  # each local-mode run of 04b.2 (a step of a small ViT, a save: about a second)
# the check's ViT: a shape the lesson does not use (3 blocks, 16 px images, 5 classes)
CHECK_SHAPE = dict(image_size=16, patch_size=4, num_layers=3, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=5)
CHECK_LR = 0.0123


def group_of_one() -> Any:
    """A process group of one in this process, its socket on loopback (``course.distributed.group_of_one``)."""
    from course.distributed import group_of_one as one

    return one()


@contextlib.contextmanager
def pretend_rank(world_size: int, rank: int) -> Iterator[None]:
    """While the learner's code runs as ``rank`` of ``world_size`` in the check's group of one, the other ways code
    reads its rank say the same as ``ray.train.get_context()``: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, and
    ``torch.distributed.get_rank()``, ``get_world_size()`` called from outside torch (torch's own calls, DCP's
    among them, still see the real group of one)."""
    import os
    import sys

    import torch.distributed as dist

    names = {"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank)}
    before_env = {name: os.environ.get(name) for name in names}
    real = {"get_rank": dist.get_rank, "get_world_size": dist.get_world_size}

    def pretended(name: str, value: int) -> Callable:
        def answer(*args: Any, **kwargs: Any) -> int:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            return real[name](*args, **kwargs) if caller.startswith("torch") else value

        return answer

    os.environ.update(names)
    dist.get_rank, dist.get_world_size = pretended("get_rank", rank), pretended("get_world_size", world_size)
    try:
        yield
    finally:
        dist.get_rank, dist.get_world_size = real["get_rank"], real["get_world_size"]
        for name, value in before_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def check_model(seed: int = 0) -> Any:
    import torch

    from helpers.vit import Architecture, VisionTransformer

    torch.manual_seed(seed)
    return VisionTransformer(Architecture(**CHECK_SHAPE))


def one_step(model: Any, optimizer: Any, seed: int = 1) -> float:
    """A training step on the check's own images: the loss before it."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(8, 3, CHECK_SHAPE["image_size"], CHECK_SHAPE["image_size"], generator=generator)
    labels = torch.randint(0, CHECK_SHAPE["num_classes"], (8,), generator=generator)
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def _local(tensor: Any) -> Any:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


# 04b.1 ---------------------------------------------------------------------------------------------------------------


def check_shard(shard: Callable[[Any, float], Any]) -> Verdict:
    """04b.1: ``shard(model, lr)`` applies ``fully_shard`` to each block of ``model.encoder.layers``, then to the
    model, and returns an AdamW at ``lr`` over the sharded parameters."""

    def run() -> str:
        if untouched(shard):
            raise NotDone
        import torch
        from torch.distributed.fsdp import FSDPModule

        with group_of_one():
            model = check_model()
            before = {id(p) for p in model.parameters()}
            try:
                optimizer = attempt(shard, model, CHECK_LR)
            except Raised as raised:  # a number of blocks written in: model.encoder.layers[n] past the check's last
                if not isinstance(raised.error, IndexError):
                    raise
                raise AssertionError(
                    f"{raised}: the check's ViT has {len(model.encoder.layers)} blocks, not the lesson's number. Loop "
                    "over `model.encoder.layers`, whatever its length"
                ) from None
            blocks = list(model.encoder.layers)
            units = [isinstance(block, FSDPModule) for block in blocks]
            root = isinstance(model, FSDPModule)
            assert root or any(units), (
                "no module became an FSDP2 unit: call `fully_shard(block)` on each block of `model.encoder.layers`, "
                "then `fully_shard(model)`"
            )
            assert any(units), (
                "only the model itself became a unit: its one unit holds every parameter, so each forward pass "
                "gathers the whole model on every rank at once, and no memory is saved while it runs. Call "
                "`fully_shard` on each block of `model.encoder.layers` first, then on the model"
            )
            assert not (all(units) and len({id(block._get_fsdp_state()) for block in blocks}) < len(blocks)), (
                "the blocks became one unit together (`fully_shard` on a list of blocks): it gathers them all at once "
                "for every forward pass, the whole encoder whole on every rank. Call `fully_shard(block)` on each "
                "block in a loop, then `fully_shard(model)`"
            )
            missing = [str(i) for i, unit in enumerate(units) if not unit]
            assert not missing, (
                f"blocks {', '.join(missing)} of {len(blocks)} are not units: the check's ViT has {len(blocks)} "
                "blocks, not the lesson's number. Loop over `model.encoder.layers`, whatever its length"
            )
            assert root, (
                "the blocks are units but the model is not: the patch embedding, class token, positions, last norm "
                "and head stay whole on every rank (plain tensors, not DTensors). Call `fully_shard(model)` after "
                "the blocks"
            )
            assert isinstance(optimizer, torch.optim.Optimizer), (
                f"your function returned {type(optimizer).__name__}, not an optimizer: return the AdamW you built"
            )
            held = [p for group in optimizer.param_groups for p in group["params"]]
            now = {id(p) for p in model.parameters()}
            assert not {id(p) for p in held} & (before - now), (
                "the optimizer holds the parameters the model had before `fully_shard` replaced them with sharded "
                "ones (DTensors): its steps would update tensors the model no longer uses. Build the optimizer after "
                "sharding, over `model.parameters()`"
            )
            assert {id(p) for p in held} == now, (
                f"the optimizer holds {len(held)} tensors, the sharded model {len(now)} parameters: build it over "
                "`model.parameters()`, after sharding"
            )
            assert isinstance(optimizer, torch.optim.AdamW), (
                f"your optimizer is {type(optimizer).__name__}: the exercise asks for `torch.optim.AdamW`"
            )
            rates = {group["lr"] for group in optimizer.param_groups}
            assert rates == {CHECK_LR}, f"the optimizer's learning rate is {rates}: use the `lr` the check passes"
            first = [_local(p).detach().clone() for p in model.parameters()]
            one_step(model, optimizer)
            moved = sum(not torch.equal(a, _local(p)) for a, p in zip(first, model.parameters(), strict=True))
            assert moved, "a training step changed no weight: does the optimizer step the model's parameters?"
        return (
            f"each of the check's {len(blocks)} blocks and the model are FSDP2 units, and AdamW at lr {CHECK_LR} holds "
            "the sharded parameters: a step moved them"
        )

    return check("04b.1", run, limit_s=CHECK_LIMIT_S)


# 04b.2 ---------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def dcp_writes(noted: list) -> Iterator[None]:
    """Notes in ``noted`` every file write of DCP's ``FileSystemWriter`` (the writer ``dcp.save`` uses for a folder),
    however the learner imported ``dcp.save``."""
    from torch.distributed.checkpoint import FileSystemWriter

    write = FileSystemWriter.write_data

    def noted_write(self: Any, plan: Any, planner: Any) -> Any:
        noted.append(str(getattr(self, "path", "")))
        return write(self, plan, planner)

    FileSystemWriter.write_data = noted_write
    try:
        yield
    finally:
        FileSystemWriter.write_data = write


def _as_rank(learner: Callable, reports: Reports, kept: Kept, rank: int, writes: list, saved: dict) -> Callable:
    """The learner's function as one rank of 2, in local mode: a sharded check model, a step, then its report."""

    def train_func(loop_config: dict) -> None:
        import torch

        from course.internals import pretend_local_world

        undo = pretend_local_world(2, rank)
        try:
            with group_of_one():
                from torch.distributed.fsdp import fully_shard

                model = check_model()
                for block in model.encoder.layers:
                    fully_shard(block)
                fully_shard(model)
                optimizer = torch.optim.AdamW(model.parameters(), lr=CHECK_LR)
                loss = one_step(model, optimizer)
                saved[rank] = [_local(p).detach().clone() for p in model.parameters()]
                with dcp_writes(writes), pretend_rank(2, rank):
                    run_watched(
                        lambda _: learner(model, optimizer, {"loss": loss, "rank": rank}),
                        loop_config,
                        reports,
                        f"rank{rank}",
                        kept=kept,
                    )
        finally:
            undo()

    return train_func


def check_report_sharded(report_sharded: Callable[[Any, Any, dict], None]) -> Verdict:
    """04b.2: ``report_sharded(model, optimizer, metrics)`` saves the state dicts of the sharded model and its
    optimizer with DCP (``"model"``, ``"optimizer"``) into a folder of its own, on every rank, and reports ``metrics``
    with that folder as the checkpoint, on every rank."""

    def run() -> str:
        if untouched(report_sharded):
            raise NotDone
        kept, saved = Kept(), {}
        try:
            findings = []
            for rank in (1, 0):
                reports, writes = Reports(), []
                try:
                    fit_locally(
                        _as_rank(report_sharded, reports, kept, rank, writes, saved), {}, limit_s=LOCAL_RUN_LIMIT_S
                    )
                except LocalLate:
                    raise
                except Exception as error:  # the learner's own error, as it is (local mode does not wrap it)
                    raise raised_locally(error, f" as rank {rank} of 2") from None
                findings.append((rank, reports.calls.get(f"rank{rank}/{rank}", []), writes))
            return _judge_saves(findings, kept, saved[0])
        finally:
            kept.close()

    return check("04b.2", run, limit_s=CHECK_LIMIT_S)


def _judge_saves(findings: list, kept: Kept, saved: list) -> str:
    """04b.2's findings on the two ranks' reports and writes, and on the reload of rank 0's checkpoint."""
    by_rank = {rank: (calls, writes) for rank, calls, writes in findings}
    for rank in (1, 0):
        calls, writes = by_rank[rank]
        assert calls, (
            f"as rank {rank} of 2 your function never called `ray.train.report`: every rank reports (Ray Train waits "
            "until all of them have), each with its own folder as the checkpoint"
        )
        assert len(calls) == 1, f"as rank {rank} of 2 your function reported {len(calls)} times: once per call"
        if not calls[0]["checkpoint"]:
            assert writes, (
                f"as rank {rank} of 2 your function saved nothing and reported no checkpoint: under FSDP2 rank "
                f"{rank} holds its own shards, which no other rank has. A checkpoint of rank 0 alone misses them, and "
                "a reload fails; `dcp.save` is a collective every rank enters (rank 0 alone would wait for the "
                "others). Every rank saves, and every rank reports its folder"
            )
            raise AssertionError(
                f"as rank {rank} of 2 your function saved its shards but reported no checkpoint: Ray Train merges the "
                "folders that the ranks pass to `ray.train.report` into one checkpoint; without rank "
                f"{rank}'s folder the checkpoint misses its shards. Every rank passes "
                "`Checkpoint.from_directory(folder)`"
            )
    assert len(kept.kept) == 2, f"the check kept {len(kept.kept)} checkpoints of 2 ranks"
    rank0 = Path(kept.kept[-1].path)
    files = sorted(p.name for p in rank0.iterdir())
    assert ".metadata" in files and any(name.endswith(".distcp") for name in files), (
        f"rank 0's checkpoint holds {files}, not DCP's files (`.metadata` and a `.distcp` file per rank): "
        "`torch.save` of a sharded state dict pickles DTensors, each rank's piece tied to the process group that "
        "made it, which no other number of ranks can load. Save with `dcp.save(state, checkpoint_id=folder)`"
    )
    metrics = kept.metrics[-1]
    assert metrics.get("loss") is not None and metrics.get("rank") == 0, (
        f"rank 0 reported {sorted(k for k in metrics if k != 'attempt')}: report the `metrics` your function is given"
    )
    return _judge_reload(rank0, saved)


def _judge_reload(folder: Path, saved: list) -> str:
    """Load rank 0's checkpoint into a fresh sharded model (other first weights) and compare with what was saved."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.fsdp import fully_shard

    with group_of_one():
        model = check_model(seed=7)
        for block in model.encoder.layers:
            fully_shard(block)
        fully_shard(model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=CHECK_LR)
        one_step(model, optimizer)  # the optimizer's state exists, to be replaced
        model_state, optimizer_state = get_state_dict(model, optimizer)
        try:
            dcp.load({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(folder))
        except BaseException as error:  # noqa: BLE001  (DCP's CheckpointException is a BaseException: other keys)
            raise AssertionError(
                f"the checkpoint could not be loaded as `{{'model': ..., 'optimizer': ...}}` ({str(error)[:160]}): "
                "save `get_state_dict(model, optimizer)`'s two state dicts under the keys 'model' and 'optimizer'"
            ) from None
        set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state)
        same = all(torch.equal(a, _local(p)) for a, p in zip(saved, model.parameters(), strict=True))
    assert same, "the weights loaded from the checkpoint are not those the model had: save the model's state dict"
    return (
        "every rank saved its shards with DCP and reported its folder; rank 0's folder holds the metadata, and a "
        "fresh sharded model loaded the weights and AdamW's state from it"
    )
