"""Lesson 04's checks (helpers.exercises.cifar10_pytorch_to_ray, and the watch of train_runs): the common wrong
answers are refused with a message that teaches, the right one passes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from exercise_checks import expect, results_here, todo  # noqa: F401  (results_here: an autouse fixture)

from helpers.exercises import (
    checking,
    cifar10_pytorch_to_ray,
    train_runs,
)


def test_normalize_batch():
    def channels_last(batch):
        return {"image": batch["image"].astype(np.float32) / 127.5 - 1, "label": batch["label"]}

    def unscaled(batch):
        return {"image": batch["image"].astype(np.float32).transpose(0, 3, 1, 2), "label": batch["label"]}

    def cifar_shape_written_in(batch):  # right on 32x32 images only
        pixels = (batch["image"].astype(np.float32) / 127.5 - 1).reshape(len(batch["image"]), 3, 32, 32)
        return {"image": pixels, "label": batch["label"]}

    def float64(batch):
        return {"image": (batch["image"] / 127.5 - 1).transpose(0, 3, 1, 2), "label": batch["label"]}

    def batch_statistics(batch):  # standardised by each batch's own mean and std
        pixels = batch["image"].astype(np.float32)
        return {"image": ((pixels - pixels.mean()) / pixels.std()).transpose(0, 3, 1, 2), "label": batch["label"]}

    def images_only(batch):
        return {"image": (batch["image"].astype(np.float32) / 127.5 - 1).transpose(0, 3, 1, 2)}

    def right(batch):
        return {"image": (batch["image"].astype(np.float32) / 127.5 - 1).transpose(0, 3, 1, 2), "label": batch["label"]}

    check = cifar10_pytorch_to_ray.check_normalize_batch
    expect(check(channels_last), checking.WRONG, "channels go first")
    expect(check(cifar_shape_written_in), checking.WRONG, "it raised ValueError")
    expect(check(unscaled), checking.WRONG, "from -1 to 1", "divide by 255")
    expect(check(float64), checking.WRONG, "float64 images", "float32")
    expect(check(batch_statistics), checking.WRONG, "the batch's own statistics")
    expect(check(images_only), checking.WRONG, "both columns")
    expect(check(right), checking.DONE, "images of another size")


def test_an_untouched_ray_train_exercise_starts_nothing():
    import ray

    def train_from_shard(loop_config):
        raise NotImplementedError  # your code

    ray.shutdown()  # an earlier test's Ray (tests run in one process): this one asks whether the check starts it
    expect(cifar10_pytorch_to_ray.check_train_from_shard(train_from_shard), checking.NOT_DONE)
    assert not ray.is_initialized(), "the check started Ray for an exercise not yet begun"


def trained_weights(steps: int = 150) -> dict:
    """The check's model trained well on its problem, in this process (what a right answer's checkpoint holds)."""
    model = cifar10_pytorch_to_ray.hidden_model()
    images, labels = cifar10_pytorch_to_ray.hidden_problem(512, seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(images)), torch.from_numpy(labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.state_dict()


def finished_run(tmp_path, weights=None, losses=(0.6, 0.4, 0.3), file_name=None):
    """What `TorchTrainer.fit()` returns, as far as 04.2's judge reads it: the last checkpoint and the reports."""
    import pandas as pd
    from ray.train import Checkpoint

    from helpers.pipeline.loops import WEIGHTS_FILE

    checkpoint = None
    if weights is not None:
        folder = tmp_path / "checkpoint"
        folder.mkdir()
        torch.save(weights, folder / (file_name or WEIGHTS_FILE))
        checkpoint = Checkpoint.from_directory(str(folder))
    reports = pd.DataFrame({"loss": list(losses)}) if losses is not None else pd.DataFrame({"epoch": [0, 1, 2]})
    return SimpleNamespace(checkpoint=checkpoint, metrics=reports.iloc[-1].to_dict(), metrics_dataframe=reports)


def judged(result, models=(1, 1), spread=0.0, calls=None) -> checking.Verdict:
    import pandas as pd

    from helpers.pipeline.loops import WEIGHTS_FILE

    workers = pd.DataFrame({"rank": range(len(models)), "models": list(models), "spread": spread})
    return checking._check(
        "04.2", lambda: cifar10_pytorch_to_ray._judge_train_run(result, workers, 3, WEIGHTS_FILE, 2, calls)
    )


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


def test_the_ray_train_exercise_rejects_runs_that_went_wrong(tmp_path):
    """04.2's judge, on what the runs of typical wrong answers leave behind (no Ray: a run is costly)."""
    good = trained_weights()
    run = lambda name, **kw: finished_run(tmp_path / name, **kw)  # noqa: E731
    for name in ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j"):
        (tmp_path / name).mkdir()
    # a model of the learner's own instead of loop_config["make_model"]()
    expect(judged(run("a", weights=good), models=(0, 0)), checking.WRONG, "make_model")
    # ray.train.report(metrics) without a checkpoint
    expect(judged(run("b")), checking.WRONG, "no checkpoint reached Ray Train", "Checkpoint.from_directory")
    # one report after the last epoch, or a number of epochs written in by hand
    expect(judged(run("c", weights=good, losses=[0.3])), checking.WRONG, "1 report(s)", "once per epoch")
    # metrics without the loss
    expect(judged(run("d", weights=good, losses=None)), checking.WRONG, "as `loss`")
    # a loss written in by hand
    expect(judged(run("e", weights=good, losses=[0.0, 0.0, 0.0])), checking.WRONG, "the same loss")
    # the weights saved under another name
    expect(judged(run("f", weights=good, file_name="weights.pt")), checking.WRONG, "no `model.pt`")
    # the DDP wrapper's state dict
    wrapped = {f"module.{name}": value for name, value in good.items()}
    expect(judged(run("g", weights=wrapped)), checking.WRONG, "module.", "model.module.state_dict()")
    # no prepare_model: each worker trained its own copy
    expect(judged(run("h", weights=good), spread=0.3), checking.WRONG, "different weights", "prepare_model")
    # a checkpoint of a model that did not learn (no optimizer.step(), or saved before training)
    untrained = cifar10_pytorch_to_ray.hidden_model().state_dict()
    expect(judged(run("i", weights=untrained)), checking.WRONG, "of new examples", "optimizer.step()")
    expect(judged(run("j", weights=good)), checking.DONE, "3 reports with a checkpoint")
    for name in ("k", "l", "m"):
        (tmp_path / name).mkdir()
    losses = [0.61, 0.41, 0.31]
    # every rank attaching a checkpoint
    every_rank = report_calls(rank1_checkpoints=True)
    expect(judged(run("k", weights=good, losses=losses), calls=every_rank), checking.WRONG, "workers [0, 1]", "rank 0")
    # the last batch's loss reported as the epoch's
    last_batch = report_calls(reported="last")
    expect(judged(run("l", weights=good, losses=losses), calls=last_batch), checking.WRONG, "last batch's")
    expect(judged(run("m", weights=good, losses=losses), calls=report_calls()), checking.DONE)


def test_a_worker_waiting_at_a_report_that_another_worker_never_reaches_is_found():
    """04.2 and 02b.1: Ray Train V2's report is a barrier; rank 0 reporting alone would wait forever (see the
    cluster test below for the whole run)."""
    reports = train_runs._Reports()
    assert reports.begin("1/0") and reports.begin("1/1")
    reports.called("1/0", {"checkpoint": True})
    assert reports.waits_in_vain("1/0", 1, waited_s=5) is None  # worker 1 may still come
    assert reports.waits_in_vain("1/0", 1, waited_s=train_runs.BARRIER_WAIT_S + 1) == "1/1"  # it has not, for long
    reports = train_runs._Reports()
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
    finding = train_runs._stopped_finding([why], 150)
    assert "Every worker calls `ray.train.report`" in finding and "only rank 0 attaches a checkpoint" in finding
    late = train_runs._stopped_finding([why | {"waited_for": None}], 150)
    assert "after 150 s" in late and "in its call number 1" in late


@pytest.mark.cluster
def test_the_ray_train_exercise_on_two_workers():
    """04.2 runs the learner's function in a real TorchTrainer: a right answer, one without prepare_model, one
    reading a column the data does not have."""
    import os
    import tempfile
    import time

    import ray
    import ray.train
    import ray.train.torch
    from ray.train import Checkpoint

    from helpers.course.cluster import configure_ray_data, init_ray
    from helpers.pipeline.loops import WEIGHTS_FILE, train_epoch

    init_ray()
    configure_ray_data()

    def trainer_function(prepare: bool, column: str = "image"):
        def train_from_shard(loop_config):
            model = loop_config["make_model"]()
            model = ray.train.torch.prepare_model(model) if prepare else model
            optimizer = torch.optim.AdamW(model.parameters(), lr=loop_config["lr"])
            shard = ray.train.get_dataset_shard("train")
            for _ in range(loop_config["epochs"]):
                pairs = (
                    (b[column], b["label"]) for b in shard.iter_torch_batches(batch_size=loop_config["batch_size"])
                )
                loss = train_epoch(model, pairs, optimizer, torch.device("cpu"), progress=False)
                with tempfile.TemporaryDirectory() as folder:
                    checkpoint = None
                    if ray.train.get_context().get_world_rank() == 0:
                        torch.save(getattr(model, "module", model).state_dict(), os.path.join(folder, WEIGHTS_FILE))
                        checkpoint = Checkpoint.from_directory(folder)
                    ray.train.report({"loss": loss}, checkpoint=checkpoint)

        return train_from_shard

    expect(
        cifar10_pytorch_to_ray.check_train_from_shard(trainer_function(prepare=False)), checking.WRONG, "prepare_model"
    )
    expect(
        cifar10_pytorch_to_ray.check_train_from_shard(trainer_function(prepare=True, column="x")),
        checking.WRONG,
        "a worker raised",
        "KeyError",
    )

    def rank_zero_reports(loop_config):  # "only rank 0 reports": rank 0 waits at the barrier for rank 1
        model = ray.train.torch.prepare_model(loop_config["make_model"]())
        optimizer = torch.optim.AdamW(model.parameters(), lr=loop_config["lr"])
        shard = ray.train.get_dataset_shard("train")
        for _ in range(loop_config["epochs"]):
            pairs = ((b["image"], b["label"]) for b in shard.iter_torch_batches(batch_size=loop_config["batch_size"]))
            loss = train_epoch(model, pairs, optimizer, torch.device("cpu"), progress=False)
            if ray.train.get_context().get_world_rank() == 0:
                with tempfile.TemporaryDirectory() as folder:
                    torch.save(model.module.state_dict(), os.path.join(folder, WEIGHTS_FILE))
                    ray.train.report({"loss": loss}, checkpoint=Checkpoint.from_directory(folder))

    started = time.monotonic()
    expect(
        cifar10_pytorch_to_ray.check_train_from_shard(rank_zero_reports),
        checking.WRONG,
        "would have waited forever",
        "only rank 0 attaches a checkpoint",
    )
    assert time.monotonic() - started < train_runs.WORKER_LIMIT_S, "the check waited for its time limit"
    expect(cifar10_pytorch_to_ray.check_train_from_shard(trainer_function(prepare=True)), checking.DONE)
    ray.shutdown()


def test_normalize_batch_names_each_half_right_answer():
    """04.1: a reshape for a transpose, height and width swapped, labels turned to floats; other right answers."""
    check = cifar10_pytorch_to_ray.check_normalize_batch

    def reshaped(batch):  # the right shape, the values in the wrong places
        images = batch["image"]
        pixels = (images.astype(np.float32) / 127.5 - 1).reshape(len(images), 3, *images.shape[1:3])
        return {"image": pixels, "label": batch["label"]}

    def width_first(batch):
        return {"image": (batch["image"].astype(np.float32) / 127.5 - 1).transpose(0, 3, 2, 1), "label": batch["label"]}

    def float_labels(batch):  # everything turned to float32, the labels too
        pixels = (batch["image"].astype(np.float32) / 127.5 - 1).transpose(0, 3, 1, 2)
        return {"image": pixels, "label": batch["label"].astype(np.float32)}

    def imagenet_statistics(batch):  # another normalisation than the lesson's
        mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
        pixels = ((batch["image"] / 255.0 - mean) / std).astype(np.float32)
        return {"image": pixels.transpose(0, 3, 1, 2), "label": batch["label"]}

    expect(check(reshaped), checking.WRONG, "in the wrong places", "transpose(0, 3, 1, 2)")
    expect(check(width_first), checking.WRONG, "height and width are swapped")
    expect(check(float_labels), checking.WRONG, "labels came back as float32", "integers")
    expect(check(imagenet_statistics), checking.WRONG, "0.5 each")
    expect(check(lambda batch: None), checking.WRONG, "it returned NoneType", "both columns")
    expect(check(todo), checking.NOT_DONE)

    def in_place(batch):  # another right answer: the batch dict changed and returned, in two steps
        pixels = batch["image"].astype(np.float32) / 255.0
        batch["image"] = np.transpose((pixels - 0.5) / 0.5, (0, 3, 1, 2))
        return batch

    def moveaxis(batch):
        pixels = np.moveaxis(batch["image"], -1, 1).astype(np.float32)
        return {"image": pixels / 127.5 - 1.0, "label": batch["label"]}

    expect(check(in_place), checking.DONE)
    expect(check(moveaxis), checking.DONE)


def measured_calls(**rank0):
    """What 04.2's watch keeps of a right 2-worker run (8 batches of 32 an epoch, lr 0.05), ``rank0`` changed."""
    calls = report_calls()
    for call in calls["1/0"]:
        mean = call["mean"]
        call |= {"sum": mean * 8, "weighted_sum": mean * 256, "largest": 32, "lr": 0.05}
        call |= {key: value(call) if callable(value) else value for key, value in rank0.items()}
    return calls


def test_the_ray_train_exercise_rejects_defaults_and_sums(tmp_path):
    """04.2: `iter_torch_batches` at its default batch size (a model that still passes, 83% measured), AdamW at its
    default lr, the epoch's summed loss: each refused by what the watch measured; a right run passes."""
    import pandas as pd

    good = trained_weights()
    losses = [0.61, 0.41, 0.31]

    def judged_with(name, calls):
        (tmp_path / name).mkdir()
        result = finished_run(tmp_path / name, weights=good, losses=[c["loss"] for c in calls["1/0"]])
        workers = pd.DataFrame({"rank": [0, 1], "models": [1, 1], "spread": 0.0})
        judge = cifar10_pytorch_to_ray._judge_train_run
        return checking._check("04.2", lambda: judge(result, workers, 3, "model.pt", 2, calls, batch_size=32, lr=0.05))

    default_batches = measured_calls(batches=1, largest=256, last=lambda c: c["mean"])
    expect(judged_with("a", default_batches), checking.WRONG, "up to 256 examples", "default, 256, left in place")
    divided = measured_calls(largest=16)
    expect(judged_with("b", divided), checking.WRONG, "up to 16 examples", "do not divide it")
    default_lr = measured_calls(lr=0.001)
    expect(judged_with("c", default_lr), checking.WRONG, "lr=0.001 (AdamW's default", "loop_config['lr']")
    summed = measured_calls(loss=lambda c: c["sum"])
    expect(judged_with("d", summed), checking.WRONG, "*sum*", "divide the sum")
    times_size = measured_calls(loss=lambda c: c["weighted_sum"])
    expect(judged_with("e", times_size), checking.WRONG, "*sum*")
    expect(judged_with("f", measured_calls()), checking.DONE, "3 reports with a checkpoint")
    weighted = measured_calls(loss=lambda c: c["weighted"])  # train_epoch's mean over examples: right too
    expect(judged_with("g", weighted), checking.DONE)
    assert losses == [c["loss"] for c in measured_calls()["1/0"]]
