"""The judging of notebook 04's exercise 04.2, a finished run of the learner's ``train_from_shard`` (on Ray Train
workers or in local mode), for :mod:`course.exercises.cifar10_pytorch_to_ray`, on the rules of
:mod:`course.exercises.checking`: the check's own model and data (:func:`hidden_model`, :func:`hidden_problem`), the
finding when a worker raised (:func:`raised_finding`), and what the reports, the checkpoint, the workers' agreement and
the model's skill say (:func:`judge_train_run`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import torch


def hidden_model() -> torch.nn.Module:
    """The model 04.2's check trains: a linear classifier of (3, 4, 4) inputs into 2 classes, the same on every call."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 2))


def hidden_problem(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """04.2's data, not the lesson's: (rows, 3, 4, 4) float32 noise, label 1 where channel 0 is brighter than 1."""
    images = np.random.default_rng(seed).normal(size=(rows, 3, 4, 4)).astype(np.float32)
    return images, (images[:, 0].mean(axis=(1, 2)) > images[:, 1].mean(axis=(1, 2))).astype(np.int64)


# 04.2: what an epoch that trained on nothing means, in both places it is found (a worker's error, rank 0's reports)
USED_UP = (
    "A generator of `(images, labels)` pairs is used up by its first pass: made once, before the epoch loop, it "
    "leaves every later epoch empty. Make the pairs from `shard.iter_torch_batches(...)` inside the loop, once per "
    "epoch"
)


def raised_finding(found: str, local: bool = False) -> str:
    """04.2's finding when a worker raised ``found`` (``KeyError: 'x'``, as ``checking.learner_error`` gives it), or
    the function did in local mode (``local``: there, its traceback can be seen in the learner's own cell)."""
    who = "your function raised" if local else "a worker raised"
    where = (
        " (run it in local mode, `ScalingConfig(num_workers=0)`, as lesson 02 does, to see its traceback in your cell)"
        if local
        else ""
    )
    if "split is empty" in found or "ZeroDivisionError" in found:  # train_epoch's, or a loop's own, on no batches
        return f"{who} {found}{where}: an epoch got no batches. {USED_UP}"
    if any(sign in found for sign in ("shape", "size mismatch", "mat1 and mat2", "must match the size")):
        return (
            f"{who} {found}{where}: the check trains a model of its own, on images of a size of its own; build "
            'the model with `loop_config["make_model"]()`, not the lesson\'s own model'
        )
    return (
        f"{who} {found}{where}. Ray Train gives the function its `loop_config` (epochs, batch_size, lr, "
        'make_model) and the data as `ray.train.get_dataset_shard("train")`, with columns `image` and `label`'
    )


def judge_train_run(
    result: Any,
    workers_seen: pd.DataFrame,
    epochs: int,
    weights_file: str,
    workers: int,
    calls: dict[str, list[dict]] | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
) -> str:
    """04.2's findings on a finished run: the reports (``calls``: each worker's ``ray.train.report`` calls, as
    ``Reports`` kept them, with what ``cifar10_pytorch_to_ray._observed`` measured since the call before: the training
    batches' losses and sizes, the optimizer's learning rate), the checkpoint, the workers' agreement, the model's
    skill. ``batch_size`` and ``lr``: what the run's ``loop_config`` asked for."""
    import os

    models = workers_seen["models"].tolist() if len(workers_seen) else []
    assert models and min(models) >= 1, (
        'the check\'s model was never built: make it with `loop_config["make_model"]()` (the check trains a model '
        "of its own on data of its own)"
    )
    assert result.checkpoint is not None, (
        "no checkpoint reached Ray Train: every worker calls `ray.train.report(metrics, checkpoint=...)` once per "
        "epoch; rank 0 passes `Checkpoint.from_directory(folder)` of a folder holding the weights, the others "
        "`checkpoint=None`"
    )
    calls = calls or {}
    rank0 = calls.get("1/0", [])
    attached = sum(1 for call in rank0 if call["checkpoint"])
    assert not (len(rank0) == epochs and attached < epochs), (
        f"rank 0 reported {len(rank0)} times, once per epoch, but attached a checkpoint to {attached} of its reports: "
        "attach one to every epoch's report: a run that stops early keeps only the epochs it checkpointed"
    )
    trained = [call.get("batches", 0) for call in rank0]
    if trained and trained[0] > 0:  # batches counted (the loss is `cross_entropy`'s): every epoch has some
        empty = [number for number, batches in enumerate(trained, 1) if not batches]
        assert not empty, (
            f"rank 0 trained on {trained[0]} batches before its first report, and on none before report(s) {empty}: "
            f"those epochs trained on nothing. {USED_UP}"
        )
    reports = len(result.metrics_dataframe)
    assert reports == epochs, (
        f"{reports} report(s) with a checkpoint for {epochs} epochs: report once per epoch, and train for "
        '`loop_config["epochs"]` epochs (the check asks for a number you have not seen)'
    )
    losses = result.metrics_dataframe.get("loss")
    assert losses is not None and losses.notna().all(), (
        f"your reports hold {sorted(set(result.metrics) - {'attempt'})}: report the epoch's mean training loss as "
        "`loss`"
    )
    assert losses.nunique() > 1, (
        f"the same loss, {losses.iloc[0]:.4f}, in every report: report the loss this epoch's training computed, "
        "and check that the model learns (does every batch call `optimizer.step()`?)"
    )
    attaching = sorted(
        int(worker.split("/")[1]) for worker, made in calls.items() if any(c["checkpoint"] for c in made)
    )
    assert not [rank for rank in attaching if rank != 0], (
        f"workers {attaching} each attached a checkpoint: the workers hold the same model (prepare_model keeps them "
        "equal), so only rank 0 attaches one, `checkpoint=None` on the others (every worker still calls "
        "`ray.train.report`); otherwise every worker uploads a copy of the same weights"
    )
    measured = [c for c in rank0 if "loss" in c and c.get("batches", 0) > 1]
    if measured:  # rank 0's reported losses, next to the losses of the batches it trained on since the last report
        last_batch = all(
            math.isclose(c["loss"], c["last"], rel_tol=1e-4)
            and not math.isclose(c["loss"], c["mean"], rel_tol=1e-4)
            and not math.isclose(c["loss"], c["weighted"], rel_tol=1e-4)
            for c in measured
        )
        assert not last_batch, (
            "the loss in each report is the epoch's *last batch's* loss: one batch of many, it jumps from epoch to "
            "epoch. Report the mean over the epoch's batches (sum each batch's loss, divide by their number)"
        )
        summed = all(
            any(math.isclose(c["loss"], c.get(total, math.nan), rel_tol=1e-4) for total in ("sum", "weighted_sum"))
            and not math.isclose(c["loss"], c["mean"], rel_tol=1e-4)
            for c in measured
        )
        assert not summed, (
            "the loss in each report is the *sum* of the epoch's batch losses: it grows with the number of batches "
            "(another batch size, another share of the data, another loss). Report the mean: divide the sum by the "
            "number of batches (or of examples, if you summed each batch's loss times its size)"
        )
    sized = [c["largest"] for c in calls.get("1/0", []) if "largest" in c]
    if batch_size is not None and sized and max(sized) != batch_size:
        largest = max(sized)
        why = (
            f" (`iter_torch_batches`' default, {largest}, left in place?)"
            if largest > batch_size
            else ": `loop_config['batch_size']` is each worker's batch already, do not divide it"
        )
        raise AssertionError(
            f"the training batches held up to {largest} examples, but `loop_config['batch_size']` was {batch_size}"
            f"{why}. Read the shard with `iter_torch_batches(batch_size=loop_config['batch_size'])`"
        )
    rates = [c["lr"] for c in calls.get("1/0", []) if "lr" in c]
    if lr is not None and rates and not math.isclose(rates[0], lr, rel_tol=1e-6):
        default = " (AdamW's default, left in place)" if math.isclose(rates[0], 1e-3) else ""
        raise AssertionError(
            f"the optimizer stepped with lr={rates[0]:g}{default}, but `loop_config['lr']` was {lr:g}: "
            "`torch.optim.AdamW(model.parameters(), lr=loop_config['lr'])`"
        )
    with result.checkpoint.as_directory() as folder:
        path = os.path.join(folder, weights_file)
        assert os.path.exists(path), (
            f"the checkpoint holds {sorted(os.listdir(folder))}, no `{weights_file}`: save the state dict with "
            f"`torch.save(..., os.path.join(folder, WEIGHTS_FILE))` before `Checkpoint.from_directory(folder)`"
        )
        weights = torch.load(path, map_location="cpu")  # saved on any device
    wrapped = [name for name in weights if name.startswith("module.")]
    assert not wrapped, (
        f"the saved weights are named `{wrapped[0]}`: that is the DistributedDataParallel wrapper's state dict, "
        "which a plain model cannot load. Save the unwrapped module's: `model.module.state_dict()`"
    )
    model = hidden_model()
    model.load_state_dict(weights)
    spread = float(workers_seen["spread"].max())
    assert spread <= 1e-5, (
        f"the {workers} workers ended with different weights (by up to {spread:.3f}): each trained a copy of its own "
        "on its share of the data. `ray.train.torch.prepare_model(model)` wraps it so that the workers average "
        "their gradients at every step"
    )
    rank0 = workers_seen[workers_seen["rank"] == 0] if "final" in workers_seen else workers_seen.iloc[0:0]
    if len(rank0) and len(rank0["final"].iloc[0]):
        saved = torch.cat([p.detach().flatten() for p in model.parameters()])
        gap = float((saved - torch.tensor(rank0["final"].iloc[0], dtype=saved.dtype)).abs().max())
        assert gap <= 1e-6, (
            f"the last checkpoint does not hold the model as training left it (its weights differ by up to {gap:.3f}): "
            "was each epoch's checkpoint saved before that epoch's training? Then every checkpoint lags one epoch "
            "behind the loss reported with it. In each epoch: train, then save the weights, then report them"
        )
    images, labels = hidden_problem(400, seed=2)  # examples no worker saw
    with torch.no_grad():
        accuracy = float((model(torch.from_numpy(images)).argmax(-1).numpy() == labels).mean())
    assert accuracy >= 0.8, (
        f"the model of the last checkpoint is right on {accuracy:.0%} of new examples (chance: 50%): does every batch "
        "of every epoch go through the loss, `backward()` and `optimizer.step()`, with the optimizer's lr from "
        "`loop_config`? Is the checkpoint saved after the epoch's training?"
    )
    return (
        f"{workers} workers trained one model from their shards: {epochs} reports with a checkpoint, unwrapped "
        f"weights that load into a plain model, right on {accuracy:.0%} of examples it never saw"
    )
