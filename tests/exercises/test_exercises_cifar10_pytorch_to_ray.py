"""Lesson 04's checks (course.exercises.cifar10_pytorch_to_ray, its judge of a finished run in cifar10_judge,
and the watch of train_runs): the common wrong answers are refused with a message that teaches, other right answers
pass.

The wrong answers a learner who half understands writes, each a case below:

04.1 `normalize_in_numpy(batch)` (uint8 (N, H, W, 3) in, float32 (N, 3, H, W) in [-1, 1] out, labels untouched):
  - the channels left last (no transpose); a reshape instead of a transpose (values in the wrong places);
    height and width swapped; CIFAR's 32x32 written into a reshape;
  - not scaled (0..255 as floats); scaled to [0, 1] only; the mean and std applied to 0..255 (no division by 255);
    the batch's own mean and std; ImageNet's or CIFAR's published statistics instead of the lesson's 0.5 and 0.5;
  - float64 left by numpy's division; the labels dropped, or turned to floats; nothing returned;
  - the lesson's `normalize` called (the lesson's `normalize_batch` copied): right values, but the exercise is to
    write it. Before issue 43 the check gave this a ✓.
04.2 `train_from_shard(loop_config)` (on Ray Train; the judge of a finished run is tried without Ray, the whole run
on a cluster):
  - a model of its own instead of `make_model()`; no `prepare_model` (each worker trains a copy of its own);
  - no checkpoint; one report after the last epoch, or the lesson's 2 epochs written in; rank 0 attaching a checkpoint
    to the last epoch's report only; every rank attaching one; only rank 0 reporting (a barrier: cluster test);
  - no `loss` in the metrics; a loss written in; the last batch's loss; the sum of the batch losses;
  - the DDP wrapper's state dict; the weights under another file name; a checkpoint of a model that did not learn;
  - `iter_torch_batches`' default batch size; the batch size divided by the workers; AdamW's default lr;
  - the pairs' generator made once, before the epoch loop: every later epoch trains on nothing (a loop of its own
    reports a loss of 0 for them; `train_epoch` raises "the train split is empty");
  - a column the data does not have (cluster test).
"""

from __future__ import annotations

import functools
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from exercise_checks import expect, leave_ray, todo

from course.exercises import (
    checking,
    cifar10_judge,
    cifar10_pytorch_to_ray,
    train_runs,
)

# --- 04.1 ------------------------------------------------------------------------------------------------------------


def _scaled(batch):
    return batch["image"].astype(np.float32) / 127.5 - 1


def channels_last(batch):
    return {"image": _scaled(batch), "label": batch["label"]}


def cifar_shape_written_in(batch):  # right on 32x32 images only
    return {"image": _scaled(batch).reshape(len(batch["image"]), 3, 32, 32), "label": batch["label"]}


def reshaped(batch):  # the right shape, the values in the wrong places
    images = batch["image"]
    return {"image": _scaled(batch).reshape(len(images), 3, *images.shape[1:3]), "label": batch["label"]}


def width_first(batch):
    return {"image": _scaled(batch).transpose(0, 3, 2, 1), "label": batch["label"]}


def unscaled(batch):
    return {"image": batch["image"].astype(np.float32).transpose(0, 3, 1, 2), "label": batch["label"]}


def zero_to_one(batch):  # scaled, the mean and std forgotten
    return {"image": (batch["image"].astype(np.float32) / 255).transpose(0, 3, 1, 2), "label": batch["label"]}


def mean_std_on_bytes(batch):  # the mean and std of [0, 1] images applied to 0..255
    return {"image": ((batch["image"].astype(np.float32) - 0.5) / 0.5).transpose(0, 3, 1, 2), "label": batch["label"]}


def batch_statistics(batch):  # standardised by each batch's own mean and std
    pixels = batch["image"].astype(np.float32)
    return {"image": ((pixels - pixels.mean()) / pixels.std()).transpose(0, 3, 1, 2), "label": batch["label"]}


def imagenet_statistics(batch):  # another normalisation than the lesson's
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    pixels = ((batch["image"] / 255.0 - mean) / std).astype(np.float32)
    return {"image": pixels.transpose(0, 3, 1, 2), "label": batch["label"]}


def cifar_statistics(batch):  # CIFAR-10's published per-channel statistics
    mean, std = np.array([0.4914, 0.4822, 0.4465]), np.array([0.247, 0.243, 0.261])
    pixels = ((batch["image"] / 255.0 - mean) / std).astype(np.float32)
    return {"image": pixels.transpose(0, 3, 1, 2), "label": batch["label"]}


def float64(batch):
    return {"image": (batch["image"] / 127.5 - 1).transpose(0, 3, 1, 2), "label": batch["label"]}


def images_only(batch):
    return {"image": _scaled(batch).transpose(0, 3, 1, 2)}


def float_labels(batch):  # everything turned to float32, the labels too
    return {"image": _scaled(batch).transpose(0, 3, 1, 2), "label": batch["label"].astype(np.float32)}


def nothing_returned(batch):
    batch["image"] = _scaled(batch).transpose(0, 3, 1, 2)


def the_lessons_normalize(batch):  # the lesson's normalize_batch, copied: right values, but not the exercise
    from helpers.cifar import normalize

    return {"image": normalize(batch["image"]), "label": batch["label"]}


def the_lessons_normalize_batch(batch):  # the same, one call further away
    from helpers import cifar

    return cifar.normalize_batch(batch)


NORMALIZE_WRONG = {
    "channels left last": (channels_last, ["channels go first"]),
    "CIFAR's 32x32 written in": (
        cifar_shape_written_in,
        ["it raised ValueError", "any image size", "transpose(0, 3, 1, 2)"],
    ),
    "a reshape for a transpose": (reshaped, ["in the wrong places", "transpose(0, 3, 1, 2)"]),
    "height and width swapped": (width_first, ["height and width are swapped"]),
    "not scaled": (unscaled, ["from -1 to 1", "divide by 255"]),
    "scaled to [0, 1] only": (zero_to_one, ["from 0.00 to 1.00", "subtract the mean"]),
    "mean and std on 0..255": (mean_std_on_bytes, ["divide by 255"]),
    "the batch's own statistics": (batch_statistics, ["the batch's own statistics"]),
    "ImageNet's statistics": (imagenet_statistics, ["0.5 each"]),
    "CIFAR's statistics": (cifar_statistics, ["0.5 each"]),
    "float64": (float64, ["float64 images", "float32"]),
    "labels dropped": (images_only, ["both columns"]),
    "labels turned to floats": (float_labels, ["labels came back as float32", "integers"]),
    "nothing returned": (nothing_returned, ["it returned NoneType", "both columns"]),
    "the lesson's normalize": (the_lessons_normalize, ["calls the lesson's `normalize`", "write what it does"]),
    "the lesson's normalize_batch": (the_lessons_normalize_batch, ["calls the lesson's `normalize`"]),
}


@pytest.mark.parametrize("answer, phrases", NORMALIZE_WRONG.values(), ids=NORMALIZE_WRONG.keys())
def test_normalize_batch_refuses(answer, phrases):
    expect(cifar10_pytorch_to_ray.check_normalize_batch(answer), checking.WRONG, *phrases)
    assert sys.getprofile() is None, "the check left its profile function on"


def right(batch):  # the solution's way
    return {"image": _scaled(batch).transpose(0, 3, 1, 2), "label": batch["label"]}


def in_place(batch):  # the batch dict changed and returned, in two steps
    pixels = batch["image"].astype(np.float32) / 255.0
    batch["image"] = np.transpose((pixels - 0.5) / 0.5, (0, 3, 1, 2))
    return batch


def moveaxis(batch):
    pixels = np.moveaxis(batch["image"], -1, 1).astype(np.float32)
    return {"image": pixels / 127.5 - 1.0, "label": batch["label"]}


def lessons_constants(batch):  # the lesson's MEAN and STD, the steps written out: right
    from helpers.cifar import MEAN, STD

    pixels = (batch["image"].astype(np.float32) / 255.0 - MEAN) / STD
    return {"image": pixels.transpose(0, 3, 1, 2), "label": batch["label"]}


NORMALIZE_RIGHT = {"the solution's": right, "in place": in_place, "moveaxis": moveaxis, "MEAN, STD": lessons_constants}


@pytest.mark.parametrize("answer", NORMALIZE_RIGHT.values(), ids=NORMALIZE_RIGHT.keys())
def test_normalize_batch_accepts(answer):
    expect(cifar10_pytorch_to_ray.check_normalize_batch(answer), checking.DONE, "images of another size")


def test_normalize_batch_not_done():
    expect(cifar10_pytorch_to_ray.check_normalize_batch(todo), checking.NOT_DONE)


def test_the_watch_for_the_lessons_function_leaves_a_profiler_in_place():
    """04.1 sets a profile function for the learner's call only; one that was there before is there again after."""
    calls = []

    def profiler(frame, event, arg):
        calls.append(event)

    sys.setprofile(profiler)
    try:
        out, lessons = cifar10_pytorch_to_ray._attempt_watching(
            right.__code__, right, {"image": np.zeros((1, 2, 2, 3), np.uint8), "label": np.zeros(1, int)}
        )
        assert sys.getprofile() is profiler and lessons and out["image"].shape == (1, 3, 2, 2)
    finally:
        sys.setprofile(None)


# --- 04.2 ------------------------------------------------------------------------------------------------------------


@functools.cache
def trained_weights(steps: int = 150) -> dict:
    """The check's model trained well on its problem, in this process (what a right answer's checkpoint holds)."""
    model = cifar10_judge.hidden_model()
    images, labels = cifar10_judge.hidden_problem(512, seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(images)), torch.from_numpy(labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.state_dict()


def finished_run(tmp_path, weights=None, losses=(0.6, 0.4, 0.3), file_name=None):
    """What `TorchTrainer.fit()` returns, as far as 04.2's judge reads it: the last checkpoint and the reports with a
    checkpoint (`metrics_dataframe` holds only those)."""
    import pandas as pd
    from ray.train import Checkpoint

    from helpers.loops import WEIGHTS_FILE

    checkpoint = None
    if weights is not None:
        folder = tmp_path / "checkpoint"
        folder.mkdir()
        torch.save(weights, folder / (file_name or WEIGHTS_FILE))
        checkpoint = Checkpoint.from_directory(str(folder))
    reports = pd.DataFrame({"loss": list(losses)}) if losses is not None else pd.DataFrame({"epoch": [0, 1, 2]})
    return SimpleNamespace(checkpoint=checkpoint, metrics=reports.iloc[-1].to_dict(), metrics_dataframe=reports)


def report_calls(rank1_checkpoints=False, reported="mean"):
    """What 04.2's watch keeps of a 2-worker run's reports: rank 0's losses next to its batches' (see _observed)."""
    batches = [(0.61, 0.55, 0.58), (0.41, 0.35, 0.38), (0.31, 0.25, 0.28)]  # (mean, last, weighted) per epoch
    rank0 = [
        {"checkpoint": True, "loss": {"mean": m, "last": last}[reported], "batches": 8, "mean": m, "last": last}
        | {"weighted": m}
        for m, last, _ in batches
    ]
    rank1 = [{"checkpoint": rank1_checkpoints, "loss": m} for m, _, _ in batches]
    return {"1/0": rank0, "1/1": rank1}


def measured_calls(**rank0):
    """What 04.2's watch keeps of a right 2-worker run (8 batches of 32 an epoch, lr 0.05), ``rank0`` changed."""
    calls = report_calls()
    for call in calls["1/0"]:
        mean = call["mean"]
        call |= {"sum": mean * 8, "weighted_sum": mean * 256, "largest": 32, "lr": 0.05}
        call |= {key: value(call) if callable(value) else value for key, value in rank0.items()}
    return calls


def checkpoint_on_the_last_report_only():
    calls = measured_calls()
    for call in calls["1/0"][:-1]:
        call["checkpoint"] = False
    return calls


def later_epochs_empty():  # a loop of its own over a generator used up by epoch 1: then 0 batches, a loss of 0
    calls = measured_calls()
    for call in calls["1/0"][1:]:
        for key in ("batches", "mean", "last", "weighted", "sum", "weighted_sum", "largest"):
            call.pop(key)
        call["loss"] = 0.0
    return calls


# Each case: what the run of a wrong answer leaves behind (the checkpoint's weights, the reports with a checkpoint,
# what the watch saw of every report), and phrases of the verdict. `losses=None`: from the calls' rank-0 reports.
TRAIN_WRONG = {
    "a model of its own": (dict(models=(0, 0)), ["make_model"]),
    "no checkpoint": (dict(weights=None), ["no checkpoint reached Ray Train", "Checkpoint.from_directory"]),
    "one report after the last epoch": (dict(losses=[0.3]), ["1 report(s)", "once per epoch"]),
    "the lesson's 2 epochs written in": (dict(losses=[0.5, 0.3]), ["2 report(s)", "a number you have not seen"]),
    "a checkpoint on the last report only": (
        dict(calls=checkpoint_on_the_last_report_only, losses=[0.31]),
        ["rank 0 reported 3 times", "a checkpoint to 1 of its reports", "every epoch's report"],
    ),
    "no loss in the metrics": (dict(losses="none"), ["as `loss`"]),
    "a loss written in": (dict(losses=[0.0, 0.0, 0.0]), ["the same loss"]),
    "the weights under another name": (dict(file_name="weights.pt"), ["no `model.pt`"]),
    "the DDP wrapper's state dict": (dict(weights="wrapped"), ["module.", "model.module.state_dict()"]),
    "no prepare_model": (dict(spread=0.3), ["different weights", "prepare_model"]),
    "a model that did not learn": (dict(weights="untrained"), ["of new examples", "optimizer.step()"]),
    "every rank attaches a checkpoint": (
        dict(calls=lambda: report_calls(rank1_checkpoints=True)),
        ["workers [0, 1]", "only rank 0 attaches one"],
    ),
    "the last batch's loss": (dict(calls=lambda: report_calls(reported="last")), ["last batch's"]),
    "the sum of the batch losses": (dict(calls=lambda: measured_calls(loss=lambda c: c["sum"])), ["*sum*", "divide"]),
    "the sum of loss times size": (dict(calls=lambda: measured_calls(loss=lambda c: c["weighted_sum"])), ["*sum*"]),
    "iter_torch_batches' default batch size": (
        dict(calls=lambda: measured_calls(batches=1, largest=256, last=lambda c: c["mean"])),
        ["up to 256 examples", "default, 256, left in place"],
    ),
    "the batch size divided by the workers": (
        dict(calls=lambda: measured_calls(largest=16)),
        ["up to 16 examples", "do not divide it"],
    ),
    "AdamW's default lr": (
        dict(calls=lambda: measured_calls(lr=0.001)),
        ["lr=0.001 (AdamW's default", "loop_config['lr']"],
    ),
    "each epoch's checkpoint saved before its training": (
        dict(final="lagging"),
        ["does not hold the model as training left it", "lags one epoch", "train, then save the weights"],
    ),
    "a generator used up by the first epoch": (
        dict(calls=later_epochs_empty),
        ["trained on 8 batches before its first report", "none before report(s) [2, 3]", "inside the loop"],
    ),
}

TRAIN_RIGHT = {
    "the watch saw nothing": dict(),
    "the epoch's mean over batches": dict(calls=report_calls),
    "the mean over batches, measured": dict(calls=measured_calls),
    "train_epoch's mean over examples": dict(calls=lambda: measured_calls(loss=lambda c: c["weighted"])),
    "the last checkpoint holds the final weights": dict(final="good"),
}


def judged(tmp_path, weights="good", losses=None, file_name=None, models=(1, 1), spread=0.0, calls=None, final=None):
    """04.2's verdict on a finished run built from a case of TRAIN_WRONG or TRAIN_RIGHT (no Ray: a run is costly)."""
    import pandas as pd

    from helpers.loops import WEIGHTS_FILE

    good = trained_weights()
    weights = {
        "good": good,
        "untrained": cifar10_judge.hidden_model().state_dict(),
        "wrapped": {f"module.{name}": value for name, value in good.items()},
        None: None,
    }[weights]
    calls = calls() if calls else None
    if losses is None:
        losses = [c["loss"] for c in calls["1/0"]] if calls else [0.6, 0.4, 0.3]
    result = finished_run(tmp_path, weights=weights, losses=None if losses == "none" else losses, file_name=file_name)
    workers = pd.DataFrame({"rank": range(len(models)), "models": list(models), "spread": spread})
    if final:  # the weights each worker's model ended with (_observed sends them): the good ones, or one epoch on
        ended = torch.cat([value.flatten() for value in good.values()]) + (0.1 if final == "lagging" else 0.0)
        workers["final"] = [ended.tolist()] * len(models)
    judge = cifar10_judge.judge_train_run
    return checking.check("04.2", lambda: judge(result, workers, 3, WEIGHTS_FILE, 2, calls, batch_size=32, lr=0.05))


@pytest.mark.parametrize("case, phrases", TRAIN_WRONG.values(), ids=TRAIN_WRONG.keys())
def test_the_ray_train_exercise_refuses(tmp_path, case, phrases):
    expect(judged(tmp_path, **case), checking.WRONG, *phrases)


@pytest.mark.parametrize("case", TRAIN_RIGHT.values(), ids=TRAIN_RIGHT.keys())
def test_the_ray_train_exercise_accepts(tmp_path, case):
    expect(judged(tmp_path, **case), checking.DONE, "3 reports with a checkpoint")


def test_a_worker_that_raised_is_named_with_a_hint():
    """04.2: what a worker raised, and for an epoch with no batches (train_epoch's error), why that happens."""
    empty = cifar10_judge.raised_finding("ValueError: the train split is empty: there is nothing to measure")
    assert "an epoch got no batches" in empty and "inside the loop" in empty
    assert "an epoch got no batches" in cifar10_judge.raised_finding("ZeroDivisionError: division by zero")
    other = cifar10_judge.raised_finding("KeyError: 'x'")
    assert "KeyError: 'x'" in other and "get_dataset_shard" in other and "no batches" not in other
    lessons_model = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x192 and 3072x10)"  # not make_model's
    assert 'loop_config["make_model"]()' in cifar10_judge.raised_finding(lessons_model)


def test_an_untouched_ray_train_exercise_starts_nothing():
    import ray

    def train_from_shard(loop_config):
        raise NotImplementedError  # your code

    ray.shutdown()  # an earlier test's Ray (tests run in one process): this one asks whether the check starts it
    expect(cifar10_pytorch_to_ray.check_train_from_shard(train_from_shard), checking.NOT_DONE)
    assert not ray.is_initialized(), "the check started Ray for an exercise not yet begun"


def test_a_worker_waiting_at_a_report_that_another_worker_never_reaches_is_found():
    """04.2 and 02b.1: Ray Train V2's report is a barrier; rank 0 reporting alone would wait forever (see the
    cluster test below for the whole run)."""
    reports = train_runs.Reports()
    assert reports.begin("1/0") and reports.begin("1/1")
    reports.called("1/0", {"checkpoint": True})
    assert reports.waits_in_vain("1/0", 1, waited_s=5) is None  # worker 1 may still come
    assert reports.waits_in_vain("1/0", 1, waited_s=train_runs.BARRIER_WAIT_S + 1) == "1/1"  # it has not, for long
    reports = train_runs.Reports()
    reports.begin("1/0"), reports.begin("1/1")
    reports.called("1/0", {"checkpoint": True})
    reports.called("1/1", {"checkpoint": False})
    reports.called("1/0", {"checkpoint": True})
    assert reports.waits_in_vain("1/0", 2, waited_s=5) is None  # worker 1 is one epoch behind: it comes
    long = train_runs.BARRIER_WAIT_S + 1
    assert reports.waits_in_vain("1/0", 2, waited_s=long) == "1/1"  # ... but not for this long (it waits elsewhere)
    reports.end("1/1")  # worker 1's function returned after one report
    assert reports.waits_in_vain("1/0", 2, waited_s=5) == "1/1"
    assert reports.waits_in_vain("1/1", 1, waited_s=long) is None  # fewer calls than no one
    assert reports.waits_in_vain("2/0", 1, waited_s=long) is None  # another attempt's workers are not this one's
    reports.stop({"worker": "1/0"})
    assert not reports.begin("2/0")  # after a stop, a restarted worker does not wait again
    why = {"worker": "1/0", "calls": 1, "in_report": True, "waited_for": "1/1"}
    finding = train_runs.stopped_finding([why], 150)
    assert "Every worker calls `ray.train.report`" in finding and "only rank 0 attaches a checkpoint" in finding
    assert "`ray.train.report` 1 time, worker 1 fewer" in finding  # not "1 time(s)" (the walk of c476c86)
    assert "2 times" in train_runs.stopped_finding([why | {"calls": 2}], 150)
    late = train_runs.stopped_finding([why | {"waited_for": None}], 150)
    assert "after 150 s" in late and "in its call number 1" in late


def shard_trainer(
    prepare=True, column="image", unwrap="hasattr", once=False, rank_zero_only=False, spelling="ray.train"
):
    """A 04.2 answer as the lesson writes it, or broken by one switch: no ``prepare_model``, a column the data does
    not have, ``model.module`` (DDP's wrapper) saved, the pairs made once before the epoch loop, rank 0 alone
    reporting. ``spelling``: how it calls Ray Train, ``ray.train.report``, or with the names imported before the
    check runs (``from ray.train import report``, as a cell's imports are), or ``import ray.train as train``."""
    import os
    import tempfile

    import ray.train
    import ray.train as train
    import ray.train.torch
    from ray.train import Checkpoint, get_context, get_dataset_shard, report

    calls = {
        "ray.train": ray.train,
        "from ray.train import": SimpleNamespace(get_context=get_context, get_dataset_shard=get_dataset_shard),
        "import ray.train as train": train,
    }[spelling]

    from helpers.loops import WEIGHTS_FILE, train_epoch

    def train_from_shard(loop_config):
        model = loop_config["make_model"]()
        model = ray.train.torch.prepare_model(model) if prepare else model
        optimizer = torch.optim.AdamW(model.parameters(), lr=loop_config["lr"])
        shard = calls.get_dataset_shard("train")
        rank = calls.get_context().get_world_rank()
        made_once = ((b[column], b["label"]) for b in shard.iter_torch_batches(batch_size=loop_config["batch_size"]))
        for _ in range(loop_config["epochs"]):
            batches = shard.iter_torch_batches(batch_size=loop_config["batch_size"])
            pairs = made_once if once else ((b[column], b["label"]) for b in batches)
            loss = train_epoch(model, pairs, optimizer, torch.device("cpu"), progress=False)
            if rank_zero_only and rank != 0:
                continue
            with tempfile.TemporaryDirectory() as folder:
                checkpoint = None
                if rank == 0:
                    saved = model.module if unwrap == "module" else getattr(model, "module", model)
                    torch.save(saved.state_dict(), os.path.join(folder, WEIGHTS_FILE))
                    checkpoint = Checkpoint.from_directory(folder)
                if spelling == "from ray.train import":
                    report({"loss": loss}, checkpoint=checkpoint)  # the name bound before the check began
                else:
                    calls.report({"loss": loss}, checkpoint=checkpoint)

    return train_from_shard


@pytest.mark.cluster
def test_the_ray_train_exercise_judges_in_local_mode_first(monkeypatch):
    """04.2: what one worker shows is judged in Ray Train's local mode, on the check's Ray Data dataset, in seconds,
    and no run on workers starts: a column the data does not have (the error, with where to see its traceback), the
    pairs made once before the epoch loop. An answer that saves ``model.module`` is not judged there: local mode
    makes no DDP wrapper, so the run on workers judges it."""

    from course.cluster import configure_ray_data, init_ray

    init_ray()
    configure_ray_data()

    def no_run_on_workers(*args, **kwargs):
        raise AssertionError("a run on workers started for an answer local mode can judge")

    monkeypatch.setattr(cifar10_pytorch_to_ray, "fit_within", no_run_on_workers)
    expect(
        cifar10_pytorch_to_ray.check_train_from_shard(shard_trainer(column="x")),
        checking.WRONG,
        "your function raised KeyError: 'x'",
        "num_workers=0",
    )
    expect(
        cifar10_pytorch_to_ray.check_train_from_shard(shard_trainer(once=True)),
        checking.WRONG,
        "an epoch got no batches",
        "inside the loop",
    )
    problem = cifar10_pytorch_to_ray._problem()
    assert cifar10_pytorch_to_ray._judge_locally(shard_trainer(unwrap="module"), problem) is None
    assert cifar10_pytorch_to_ray._judge_locally(shard_trainer(), problem) is None
    for spelling in ("from ray.train import", "import ray.train as train"):  # every import style is watched
        assert cifar10_pytorch_to_ray._judge_locally(shard_trainer(spelling=spelling), problem) is None, spelling
    leave_ray()  # the local runs' Ray Data iterators collected while Ray is here


@pytest.mark.cluster
def test_the_ray_train_exercise_on_two_workers():
    """04.2 on Ray Train workers, for what one worker cannot show: no prepare_model (the workers' weights drift
    apart), only rank 0 reporting (rank 0 waits at the barrier for ever). Both pass local mode first. The other wrong
    answers are judged without Ray (TRAIN_WRONG) or in local mode (above); a right answer passes on workers in
    solutions/04_cifar10_pytorch_to_ray.ipynb (tests/lessons/test_solutions.py), others without Ray (TRAIN_RIGHT)."""

    from course.cluster import configure_ray_data, init_ray

    init_ray()
    configure_ray_data()
    expect(cifar10_pytorch_to_ray.check_train_from_shard(shard_trainer(prepare=False)), checking.WRONG, "prepare_model")
    expect(
        cifar10_pytorch_to_ray.check_train_from_shard(shard_trainer(rank_zero_only=True)),
        checking.WRONG,
        "would have waited forever",
        "only rank 0 attaches a checkpoint",
    )
    leave_ray()
