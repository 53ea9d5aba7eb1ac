"""The "Your turn" checks of notebook 04 (CIFAR-10, from PyTorch to Ray) (rules: ``course.exercises.checking``)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from course.deadline import first_line
from course.exercises.checking import NotDone, Raised, Verdict, attach_ray, attempt, check, learner_error, untouched
from course.exercises.train_runs import (
    RUN_LIMIT_S,
    WORKER_LIMIT_S,
    Kept,
    LocalLate,
    Reports,
    call,
    fit_locally,
    fit_within,
    run_watched,
    stopped_finding,
)


def _attempt_watching(code: Any, function: Callable, *args: Any) -> tuple[Any, bool]:
    """``attempt(function, *args)``, and whether the function of ``code`` ran inside it (in this thread), however the
    learner's code reached it: by its name, through the module, or through another function that calls it."""
    seen: list[bool] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            seen.append(True)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        return attempt(function, *args), bool(seen)
    finally:
        sys.setprofile(previous)


def check_normalize_batch(normalize_batch: Callable[[dict], dict]) -> Verdict:
    """04.1: ``normalize_batch(batch)`` for ``map_batches``: uint8 (N, H, W, C) to normalised float (N, C, H, W),
    written in numpy, without the lesson's ``normalize``."""
    from helpers.cifar import normalize

    def run() -> str:
        # images of a size the lesson never used, so that no shape can be written in by hand
        images = np.random.default_rng(0).integers(0, 256, (6, 24, 20, 3), dtype=np.uint8)
        labels = np.array([3, 1, 4, 1, 5, 9])
        try:
            out, lessons = _attempt_watching(
                normalize.__code__, normalize_batch, {"image": images.copy(), "label": labels.copy()}
            )
        except Raised as raised:
            if "reshape" in str(raised):  # a reshape to the lesson's 32x32
                raise AssertionError(
                    f"on a batch of 6 images of 24x20 pixels {raised}: your function must work for any image size, "
                    "so take the sizes from the batch, or better, move the channel axis with `transpose(0, 3, 1, 2)` "
                    "instead of reshaping to fixed sizes"
                ) from None
            raise
        assert not lessons, (
            "your function calls the lesson's `normalize` (by its name, or through the lesson's `normalize_batch`): "
            "the exercise is to write what it does yourself, in numpy, on the whole batch. Its steps: the float type "
            "the model's weights have, the pixels scaled to [0, 1], the mean and std of 0.5 per channel, and the "
            "channel axis moved first"
        )
        assert isinstance(out, Mapping) and {"image", "label"} <= set(out), (
            f"it returned {type(out).__name__}{' with ' + str(sorted(out)) if isinstance(out, Mapping) else ''}: "
            "`map_batches` wants the batch back, a dict with both columns, `image` and `label`"
        )
        result = np.asarray(out["image"])
        assert result.shape != (6, 3, 20, 24), (
            f"6 images of 24x20 pixels came back with shape {result.shape}, (N, C, W, H): height and width are "
            "swapped. `transpose(0, 3, 1, 2)` takes (N, H, W, C) to (N, C, H, W)"
        )
        assert result.shape == (6, 3, 24, 20), (
            f"6 images of 24x20 pixels came back with shape {result.shape}: channels go first, (N, C, H, W), "
            "whatever the image size (`transpose`, not a reshape to 32x32)"
        )
        assert result.dtype == np.float32, (
            f"{result.dtype} images: the model's weights are float32, so its images must be too"
        )
        expected = normalize(images)
        if not np.allclose(result, expected, atol=1e-5):
            reshaped = expected.transpose(0, 2, 3, 1).reshape(result.shape)  # the right values, channels last, reshaped
            assert not np.allclose(result, reshaped, atol=1e-5), (
                "the values are right but in the wrong places: a reshape to (N, C, H, W) keeps the memory order of "
                "(N, H, W, C), so it mixes the pixels and channels of each image. Move the channel axis with "
                "`transpose(0, 3, 1, 2)`"
            )
            assert not math.isclose(float(result.mean()), 0, abs_tol=1e-3) or not math.isclose(
                float(result.std()), 1, rel_tol=1e-2
            ), (
                "every batch comes out with mean 0 and std 1: you standardised by the batch's own statistics, so the "
                "same image gets other values in another batch. Use the fixed mean and std of the lesson (0.5 and 0.5)"
            )
            raise AssertionError(
                f"values from {result.min():.2f} to {result.max():.2f}; the lesson's images go from -1 to 1: scale "
                "to [0, 1] first (divide by 255), then subtract the mean, divide by the standard deviation (0.5 each)"
            )
        found = np.asarray(out["label"])
        assert np.array_equal(found, labels), "the labels changed: keep them as they are"
        assert found.dtype.kind in "iu", (
            f"the labels came back as {found.dtype}: keep them as they are, integers. `cross_entropy` takes class "
            "indices as integers (int64); only the images are scaled"
        )
        return "the same values as the lesson's `normalize` on images of another size, labels kept"

    return check("04.1", run)


def hidden_model() -> torch.nn.Module:
    """The model 04.2's check trains: a linear classifier of (3, 4, 4) inputs into 2 classes, the same on every call."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 2))


def hidden_problem(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """04.2's data, not the lesson's: (rows, 3, 4, 4) float32 noise, label 1 where channel 0 is brighter than 1."""
    images = np.random.default_rng(seed).normal(size=(rows, 3, 4, 4)).astype(np.float32)
    return images, (images[:, 0].mean(axis=(1, 2)) > images[:, 1].mean(axis=(1, 2))).astype(np.int64)


def _observed(loop_config: dict) -> None:
    """Runs on each Ray Train worker: the learner's function, watched (``run_watched``: its reports counted, with
    the training losses of the batches since the last report), then whether the workers' models agree."""
    import ray.train
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    config = dict(loop_config)
    learner, tally, reports = config.pop("learner"), config.pop("tally"), config.pop("reports")
    kept = config.pop("kept", None)  # local mode: each checkpoint kept, as storage would (train_runs.Kept)
    made: list[torch.nn.Module] = []
    losses: list[tuple[float, int]] = []  # (loss, batch size) of each training batch since the last report
    rates: list[float] = []  # the learning rate of each optimizer step since the last report
    cross_entropy = torch.nn.functional.cross_entropy

    def make_model() -> torch.nn.Module:
        made.append(hidden_model())
        return made[-1]

    def counted_cross_entropy(input: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        loss = cross_entropy(input, *args, **kwargs)
        if torch.is_grad_enabled() and loss.dim() == 0:
            losses.append((float(loss.detach()), int(input.shape[0])))
        return loss

    def stepped(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        rates.append(float(optimizer.param_groups[0]["lr"]))

    def batch_losses() -> dict:
        found: dict[str, Any] = {"lr": rates[0]} if rates else {}
        rates.clear()
        if not losses:
            return found
        values, sizes = np.array([v for v, _ in losses]), np.array([n for _, n in losses])
        found |= {"batches": len(values), "last": float(values[-1]), "mean": float(values.mean())}
        found["weighted"] = float((values * sizes).sum() / sizes.sum())
        found["sum"], found["weighted_sum"] = float(values.sum()), float((values * sizes).sum())
        found["largest"] = int(sizes.max())
        losses.clear()
        return found

    torch.nn.functional.cross_entropy = counted_cross_entropy  # nn.CrossEntropyLoss calls it too
    hook = register_optimizer_step_pre_hook(stepped)
    try:
        run_watched(learner, config | {"make_model": make_model}, reports, measure=batch_losses, kept=kept)
    finally:
        torch.nn.functional.cross_entropy = cross_entropy
        hook.remove()
    spread, final = -1.0, []  # no model built with make_model
    if made:
        weights = torch.cat([p.detach().flatten().cpu() for p in made[-1].parameters()])
        everyone = [weights]  # local mode: one worker, no process group
        if torch.distributed.is_initialized():
            everyone = [torch.zeros_like(weights) for _ in range(ray.train.get_context().get_world_size())]
            torch.distributed.all_gather(everyone, weights)
        spread = max(float((other - everyone[0]).abs().max()) for other in everyone)
        final = weights.tolist()  # the model as training left it: the last checkpoint must hold these
    call(tally, "add", rank=ray.train.get_context().get_world_rank(), models=len(made), spread=spread, final=final)


class _Seen(list):
    """In local mode, what :func:`_observed` tells of its one worker (on workers: a ``helpers.measure.Tally``)."""

    def add(self, **row: Any) -> None:
        self.append(row)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(list(self))


def _judge_locally(train_from_shard: Callable[[dict], None], problem: dict) -> None:
    """04.2 in Ray Train's local mode, in seconds: the learner's function in this process on the check's dataset
    (``train_runs.fit_locally``), judged as a run on workers is (:func:`_judge_train_run`), but for what needs two
    ranks (which ranks attach a checkpoint, whether they end with the same weights, a report on rank 0 only).
    Raises the finding; returns when local mode sees nothing wrong, or cannot judge: ``model.module``, DDP's
    wrapper, which local mode does not make (``prepare_model`` gives the model back as it is)."""
    from helpers.loops import WEIGHTS_FILE

    reports, seen, kept = Reports(), _Seen(), Kept()
    loop_config = {key: problem[key] for key in ("epochs", "batch_size", "lr")}
    loop_config |= {"learner": train_from_shard, "tally": seen, "reports": reports, "kept": kept}
    try:
        try:
            fit_locally(_observed, loop_config, datasets={"train": problem["train"]})
        except LocalLate:
            raise
        except AttributeError as error:
            if "'module'" in str(error):  # model.module: DDP's wrapper exists on workers only
                return
            raise AssertionError(_raised_finding(first_line(error), local=True)) from None
        except NotImplementedError:
            raise NotDone from None
        except Exception as error:  # the learner's own error, as it is (local mode does not wrap it)
            raise AssertionError(_raised_finding(first_line(error), local=True)) from None
        calls = reports.state()["calls"]
        _judge_train_run(kept.result(), seen.table(), problem["epochs"], WEIGHTS_FILE, 1, calls, **problem["asked"])
    finally:
        kept.close()


def _problem() -> dict:
    """04.2's run: the check's own data as a Ray Data dataset, and the loop config it asks for."""
    import ray.data

    images, labels = hidden_problem(512, seed=1)
    train = ray.data.from_items([{"image": x, "label": y} for x, y in zip(images, labels, strict=True)])
    return {"train": train, "epochs": 3, "batch_size": 32, "lr": 0.05, "asked": {"batch_size": 32, "lr": 0.05}}


def check_train_from_shard(train_from_shard: Callable[[dict], None], workers: int = 2) -> Verdict:
    """04.2: ``train_from_shard(loop_config)`` trains on Ray Train from ``get_dataset_shard("train")``, one report
    with a checkpoint per epoch; run on 2 CPU workers with a small problem of the check's own."""
    import ray
    import ray.data
    from ray.train import CheckpointConfig, LoggingConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from course.distributed import torch_config
    from course.storage import run_name, storage_path
    from helpers.loops import WEIGHTS_FILE
    from helpers.measure import Tally

    def locally() -> None:  # Ray Train's local mode: in seconds, whatever one worker shows
        if untouched(train_from_shard):
            raise NotDone
        attach_ray()
        _judge_locally(train_from_shard, _problem())

    def run() -> str:
        attach_ray()
        problem = _problem()
        train, epochs, batch_size, lr = (problem[key] for key in ("train", "epochs", "batch_size", "lr"))
        tally = Tally.remote()
        reports = ray.remote(num_cpus=0)(Reports).remote()
        loop_config = {
            "epochs": epochs,
            "batch_size": batch_size,
            "lr": lr,
            "learner": train_from_shard,
            "tally": tally,
            "reports": reports,
        }
        trainer = TorchTrainer(
            _observed,
            train_loop_config=loop_config,
            datasets={"train": train},
            scaling_config=ScalingConfig(num_workers=workers),
            torch_config=torch_config(),
            run_config=RunConfig(
                name=run_name("exercise-04.2"),
                storage_path=storage_path(),  # every worker writes its checkpoints there, on any node
                checkpoint_config=CheckpointConfig(num_to_keep=None),
                logging_config=LoggingConfig(log_level="ERROR"),
            ),
        )
        try:
            try:
                result = fit_within(trainer)
            except Exception as error:  # the learner's error, raised in a worker, or a worker the check stopped
                stopped = ray.get(reports.state.remote())["stopped"]
                if stopped:
                    raise AssertionError(stopped_finding(stopped, WORKER_LIMIT_S)) from None
                found = learner_error(error)
                if "NotImplementedError" in found:
                    raise NotDone from None
                raise AssertionError(_raised_finding(found)) from None
            calls = ray.get(reports.state.remote())["calls"]
            seen = ray.get(tally.table.remote())
        finally:  # the check's own actors end with it, whatever the run did (a failed run leaves its handles held)
            ray.kill(reports)
            ray.kill(tally)
        return _judge_train_run(result, seen, epochs, WEIGHTS_FILE, workers, calls, batch_size=batch_size, lr=lr)

    return check(
        "04.2", run, limit_s=RUN_LIMIT_S + 60, ray_first=lambda: not untouched(train_from_shard), locally=locally
    )


# 04.2: what an epoch that trained on nothing means, in both places it is found (a worker's error, rank 0's reports)
USED_UP = (
    "A generator of `(images, labels)` pairs is used up by its first pass: made once, before the epoch loop, it "
    "leaves every later epoch empty. Make the pairs from `shard.iter_torch_batches(...)` inside the loop, once per "
    "epoch"
)


def _raised_finding(found: str, local: bool = False) -> str:
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


def _judge_train_run(
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
    ``Reports`` kept them, with what ``_observed`` measured since the call before: the training batches' losses and
    sizes, the optimizer's learning rate), the checkpoint, the workers' agreement, the model's skill. ``batch_size``
    and ``lr``: what the run's ``loop_config`` asked for."""
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
