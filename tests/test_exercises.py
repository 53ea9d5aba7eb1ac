"""The exercises' checks: "not done yet" for an untouched exercise, a specific message for a typical wrong answer
(never an exception), and done for a right one. The solutions notebooks themselves run in test_solutions.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from ray.train import DataConfig, FailureConfig, ScalingConfig

from helpers.exercises import (
    checking,
    cifar10_pytorch_to_ray,
    data_loading_playbook,
    fault_tolerance,
    local_finetune,
    ray_data,
    ray_serve,
    ray_train_finetune,
    train_runs,
)
from helpers.pipeline.models import standin_processor


@pytest.fixture(autouse=True)
def results_here(tmp_path, monkeypatch):
    monkeypatch.setattr(checking, "RESULTS_DIR", tmp_path)


def todo(*args, **kwargs):
    raise NotImplementedError


def expect(verdict: checking.Verdict, state: str, *phrases: str) -> None:
    assert verdict.state == state, verdict
    for phrase in phrases:
        assert phrase in verdict.message, verdict


def test_an_untouched_exercise_is_not_done_yet_and_is_recorded(capsys, tmp_path):
    verdict = local_finetune.check_freeze_backbone(todo)
    expect(verdict, checking.NOT_DONE, "replace `raise NotImplementedError`")
    assert "… exercise 01.1: replace" in capsys.readouterr().out
    assert checking.read("01", tmp_path)["01.1"]["state"] == checking.NOT_DONE


def test_code_that_raises_is_a_finding_not_a_crash():
    expect(
        ray_train_finetune.check_best_evaluation(lambda history: history["nope"]), checking.WRONG, "it raised KeyError"
    )


def test_an_answer_of_a_shape_the_check_did_not_expect_is_a_verdict():
    """02.2 with a function that returns only the ScalingConfig: the check unpacks a pair (a TypeError before)."""
    only_the_config = lambda workers, batch, resources: ScalingConfig(num_workers=workers)  # noqa: E731
    expect(ray_train_finetune.check_scaling(only_the_config), checking.WRONG, "return a pair", "ScalingConfig")

    def surprise():  # a check body that fails in a way no assertion foresaw
        raise TypeError("cannot unpack non-iterable int object")

    expect(checking._check("02.2", surprise), checking.WRONG, "could not use what your code gave it", "TypeError")

    def exits():  # learner code that calls sys.exit(): a verdict, and the notebook's kernel goes on
        raise SystemExit(1)

    expect(checking._check("02.2", exits), checking.WRONG, "SystemExit")


def test_a_check_that_does_not_finish_in_time_gives_a_verdict_at_its_limit():
    import threading
    import time

    release = threading.Event()
    started = time.monotonic()
    verdict = checking._check("02.1", lambda: release.wait(30) and "never", limit_s=0.5, late="Look at `x`")
    release.set()
    expect(verdict, checking.WRONG, "no verdict within the check's time limit of 0 s", "Look at `x`")
    assert time.monotonic() - started < 5


def test_freeze_backbone():
    def freeze_everything(model):
        for p in model.parameters():
            p.requires_grad = False

    def freeze_the_embeddings_only(model):
        for p in model.vit.embeddings.parameters():
            p.requires_grad = False

    expect(local_finetune.check_freeze_backbone(freeze_everything), checking.WRONG, "no parameter trains any more")
    expect(
        local_finetune.check_freeze_backbone(freeze_the_embeddings_only), checking.WRONG, "backbone parameters still"
    )

    def right(model):
        for p in model.vit.parameters():
            p.requires_grad = False

    expect(local_finetune.check_freeze_backbone(right), checking.DONE, "only the head trains")


def test_model_inputs():
    processor = standin_processor()

    def unresized(images, processor):
        return {"pixel_values": torch.stack([torch.zeros(3, 80, 80) for _ in images])}

    expect(
        local_finetune.check_model_inputs(unresized, processor),
        checking.WRONG,
        "shape (4, 3, 80, 80)",
        "expects (4, 3, 64, 64)",
        "processor",
    )
    expect(local_finetune.check_model_inputs(lambda i, p: p(i), processor), checking.WRONG, "return_tensors")
    not_normalised = lambda i, p: p(i, return_tensors="pt", do_normalize=False)  # noqa: E731
    expect(
        local_finetune.check_model_inputs(not_normalised, processor), checking.WRONG, "not normalised", "do_normalize"
    )

    def own_normalisation(images, processor):  # right shape and range, but not the processor's mean and std
        pixels = processor(images, return_tensors="pt", do_normalize=False)["pixel_values"]
        return {"pixel_values": pixels * 2 - 1.2}

    expect(local_finetune.check_model_inputs(own_normalisation, processor), checking.WRONG, "call the processor itself")
    expect(local_finetune.check_model_inputs(lambda i, p: p(i, return_tensors="pt"), processor), checking.DONE)


def test_best_evaluation():
    expect(
        ray_train_finetune.check_best_evaluation(
            lambda h: (int(h["step"].iloc[-1]), float(h["eval_accuracy"].iloc[-1]))
        ),
        checking.WRONG,
        "you returned the last evaluation",
    )
    expect(
        ray_train_finetune.check_best_evaluation(lambda h: (int(h["step"].iloc[h["eval_loss"].idxmin() + 1]), 0.89)),
        checking.WRONG,
        "not the row with the highest `eval_accuracy`",
    )
    lowest_loss = lambda h: (
        int(h.loc[h["eval_loss"].idxmin(), "step"]),
        float(h.loc[h["eval_loss"].idxmin(), "eval_accuracy"]),
    )  # noqa: E731,E501
    expect(ray_train_finetune.check_best_evaluation(lowest_loss), checking.WRONG, "lowest `eval_loss`", "highest")
    by_position = lambda h: (int(h["step"].iloc[h["eval_accuracy"].idxmax()]), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(ray_train_finetune.check_best_evaluation(by_position), checking.WRONG, "`.loc`, not `.iloc`")
    expect(ray_train_finetune.check_best_evaluation(lambda h: 200), checking.WRONG, "return a pair")
    best = lambda h: (int(h.loc[h["eval_accuracy"].idxmax(), "step"]), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(ray_train_finetune.check_best_evaluation(best), checking.DONE)


def test_scaling():
    def same_batch_everywhere(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers), global_batch

    def always_gpu(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu=True), global_batch // workers

    expect(ray_train_finetune.check_scaling(same_batch_everywhere), checking.WRONG, "divided by the number of workers")
    expect(ray_train_finetune.check_scaling(always_gpu), checking.WRONG, "never ask Ray for one it lacks")

    def gpu_key_present(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu="GPU" in resources), global_batch // workers

    expect(ray_train_finetune.check_scaling(gpu_key_present), checking.WRONG, "GPU: 0.0", "no GPU")

    def true_division(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers), global_batch / workers

    expect(ray_train_finetune.check_scaling(true_division), checking.WRONG, "whole number")

    def the_lessons_numbers(workers, global_batch, resources):
        return ScalingConfig(num_workers=4, use_gpu=resources.get("GPU", 0) >= 4), global_batch // 4

    expect(ray_train_finetune.check_scaling(the_lessons_numbers), checking.WRONG, "use the arguments")

    def right(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu=resources.get("GPU", 0) >= workers), global_batch // workers

    expect(ray_train_finetune.check_scaling(right), checking.DONE)


def test_resume_refuses_a_failure_config_that_is_missing_or_not_one_restart():
    def counter(loop_config):  # never run: the FailureConfig is refused first
        pass

    expect(fault_tolerance.check_resume(counter, None), checking.WRONG, "make it a `FailureConfig`")
    expect(fault_tolerance.check_resume(counter, FailureConfig(max_failures=0)), checking.WRONG, "exactly one restart")
    expect(fault_tolerance.check_resume(counter, FailureConfig(max_failures=-1)), checking.WRONG, "would never stop")
    expect(fault_tolerance.check_resume(todo, FailureConfig(max_failures=1)), checking.NOT_DONE)


@pytest.mark.cluster
def test_resume_runs_the_counter_on_ray_train_and_kills_its_worker_once():
    """02b.1 on Ray Train: the answers of a learner who half-understood are refused."""
    import tempfile
    from pathlib import Path

    import ray
    import ray.train

    from helpers.course.cluster import init_ray

    init_ray()

    def count(loop_config, resume=True, with_checkpoint=True, steps=None):
        start = 0
        checkpoint = ray.train.get_checkpoint()
        if resume and checkpoint is not None:
            with checkpoint.as_directory() as folder:
                start = int(Path(folder, "step.txt").read_text())
        for step in range(start + 1, (steps or loop_config["steps"]) + 1):
            with tempfile.TemporaryDirectory() as folder:
                Path(folder, "step.txt").write_text(str(step))
                saved = ray.train.Checkpoint.from_directory(folder) if with_checkpoint else None
                ray.train.report({"step": step}, checkpoint=saved)

    one_restart = FailureConfig(max_failures=1)
    from_scratch = lambda c: count(c, resume=False)  # noqa: E731
    expect(fault_tolerance.check_resume(from_scratch, one_restart), checking.WRONG, "counted from 1 again")
    no_checkpoint = lambda c: count(c, with_checkpoint=False)  # noqa: E731
    expect(fault_tolerance.check_resume(no_checkpoint, one_restart), checking.WRONG, "no checkpoint was reported")
    ten_steps = lambda c: count(c, steps=10)  # noqa: E731
    expect(fault_tolerance.check_resume(ten_steps, one_restart), checking.WRONG, "count to the number the loop config")

    def other_key(loop_config):  # reports {"n": step}: no crash comes, and the check has no `step` to read
        for step in range(1, loop_config["steps"] + 1):
            with tempfile.TemporaryDirectory() as folder:
                Path(folder, "step.txt").write_text(str(step))
                ray.train.report({"n": step}, checkpoint=ray.train.Checkpoint.from_directory(folder))

    expect(fault_tolerance.check_resume(other_key, one_restart), checking.WRONG, "no `step`", "['n']")

    def rank_zero_reports(loop_config):  # "only rank 0 reports": the other worker never reaches the barrier
        if ray.train.get_context().get_world_rank() == 0:
            count(loop_config)

    expect(
        fault_tolerance.check_resume(rank_zero_reports, one_restart),
        checking.WRONG,
        "would have waited forever",
        "Every worker calls `ray.train.report`",
    )
    # The right answer passes in solutions/02b_fault_tolerance.ipynb (tests/test_solutions.py).
    ray.shutdown()


def test_mirror_half():
    def upside_down(batch):
        batch["image"][::2] = batch["image"][::2, ::-1]
        return batch

    def all_of_them(batch):
        batch["image"] = batch["image"][:, :, ::-1]
        return batch

    def half(batch):
        batch["image"][::2] = batch["image"][::2, :, ::-1]
        return batch

    def every_other_one(batch):
        batch["image"] = [image[:, ::-1] if i % 2 else image for i, image in enumerate(batch["image"])]
        return batch

    expect(ray_data.check_mirror_half(upside_down), checking.WRONG, "upside down", "width axis")
    expect(ray_data.check_mirror_half(all_of_them), checking.WRONG, "100% of the images")
    expect(ray_data.check_mirror_half(half), checking.WRONG, "different sizes", "each image by itself")
    expect(ray_data.check_mirror_half(every_other_one), checking.DONE, "50% of 64 images")


@pytest.mark.cluster
def test_the_actor_class_check_runs_an_actor_pool_and_refuses_half_right_classes():
    """03.1: a softmax forgotten, the wrong class's probability, columns dropped, no batch returned, a function: each
    refused."""
    import logging
    from pathlib import Path

    import numpy as np
    import ray
    import torch
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    from helpers.course.cluster import init_ray
    from helpers.pipeline.features import pixel_values

    init_ray()

    class Classifier:
        def __init__(self, checkpoint):
            with checkpoint.as_directory() as folder:
                self.processor = AutoImageProcessor.from_pretrained(Path(folder) / "checkpoint", backend="pil")
                self.model = AutoModelForImageClassification.from_pretrained(Path(folder) / "checkpoint").eval()

        @torch.no_grad()
        def scores(self, batch):
            return self.model(pixel_values=pixel_values(self.processor, list(batch["image"]))).logits

        def __call__(self, batch):
            probabilities = self.scores(batch).softmax(-1)
            batch["predicted"] = np.array([self.model.config.id2label[i] for i in probabilities.argmax(-1).tolist()])
            batch["confidence"] = probabilities.max(-1).values.numpy()
            return batch

    class RawLogits(Classifier):
        def __call__(self, batch):
            logits = self.scores(batch)
            batch["predicted"] = np.array([self.model.config.id2label[i] for i in logits.argmax(-1).tolist()])
            batch["confidence"] = logits.max(-1).values.numpy()
            return batch

    class FirstClass(Classifier):
        def __call__(self, batch):
            batch = super().__call__(batch)
            batch["confidence"] = self.scores(batch).softmax(-1)[:, 0].numpy()
            return batch

    class OnlyItsColumns(Classifier):
        def __call__(self, batch):
            out = super().__call__(batch)
            return {"predicted": out["predicted"], "confidence": out["confidence"]}

    class ForgetsToReturn(Classifier):
        def __call__(self, batch):
            super().__call__(batch)  # and returns None

    class LoadsEveryBatch(Classifier):
        def __init__(self, checkpoint):
            self.checkpoint = checkpoint

        def __call__(self, batch):
            super().__init__(self.checkpoint)
            return super().__call__(batch)

    class OneImageAtATime(Classifier):
        @torch.no_grad()
        def scores(self, batch):
            images = list(batch["image"])
            return torch.cat([self.model(pixel_values=pixel_values(self.processor, [i])).logits for i in images])

    def a_function(batch):
        return batch

    logged = []
    handler = logging.Handler()
    handler.emit = logged.append
    logging.getLogger("ray.data").addHandler(handler)
    try:  # the check names the learner's error in one line; Ray Data does not log its tracebacks on stderr first
        expect(ray_data.check_confident_classifier(ForgetsToReturn), checking.WRONG, "NoneType")
    finally:
        logging.getLogger("ray.data").removeHandler(handler)
    assert not [record.getMessage()[:200] for record in logged if record.levelno >= logging.ERROR]
    expect(ray_data.check_confident_classifier(RawLogits), checking.WRONG, "softmax")
    expect(ray_data.check_confident_classifier(FirstClass), checking.WRONG, "of the *predicted* class")
    expect(ray_data.check_confident_classifier(OnlyItsColumns), checking.WRONG, "return it whole")
    expect(ray_data.check_confident_classifier(a_function), checking.WRONG, "is not a class")
    expect(ray_data.check_confident_classifier(LoadsEveryBatch), checking.WRONG, "once for every batch", "__init__")
    expect(ray_data.check_confident_classifier(OneImageAtATime), checking.WRONG, "3 forward passes", "whole batch")
    expect(ray_data.check_confident_classifier(Classifier), checking.DONE, "never seen")
    ray.shutdown()


@pytest.mark.cluster
def test_the_ray_data_checks():
    """05.1 runs Ray Data: on the test cluster, or a local Ray."""
    import ray

    from helpers.course.cluster import configure_ray_data, init_ray

    init_ray()
    configure_ray_data()
    in_order = lambda ds, epoch: ds.to_pandas()["id"].to_numpy()  # noqa: E731
    same_seed = lambda ds, epoch: ds.random_shuffle(seed=0).to_pandas()["id"].to_numpy()  # noqa: E731
    expect(data_loading_playbook.check_epoch_order(in_order), checking.WRONG, "nothing was shuffled")
    expect(data_loading_playbook.check_epoch_order(same_seed), checking.WRONG, "epochs 0 and 1 give the same order")
    no_seed = lambda ds, epoch: ds.random_shuffle().to_pandas()["id"].to_numpy()  # noqa: E731
    expect(data_loading_playbook.check_epoch_order(no_seed), checking.WRONG, "every random step needs a seed")
    batches = lambda ds, epoch: [b["id"] for b in ds.random_shuffle(seed=epoch).iter_batches(batch_size=300)]  # noqa: E731
    expect(data_loading_playbook.check_epoch_order(batches), checking.WRONG, "parts (batches?)", "np.concatenate")

    def numpy_permutation(ds, epoch):  # repeatable and new every epoch, but shuffled on the driver
        ids = np.sort(ds.to_pandas()["id"].to_numpy())
        return ids[np.random.default_rng(epoch).permutation(len(ids))]

    expect(
        data_loading_playbook.check_epoch_order(numpy_permutation), checking.WRONG, "not by Ray Data", "random_shuffle"
    )

    def right(ds, epoch):
        return np.concatenate([b["id"] for b in ds.random_shuffle(seed=epoch).iter_batches(batch_size=None)])

    expect(data_loading_playbook.check_epoch_order(right), checking.DONE, "shuffled by Ray Data")

    ray.shutdown()


# --- 04 and 05


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

    check = data_loading_playbook.check_quick_validation
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


def test_the_autoscaling_check():
    """06.2 needs no cluster: Serve checks the options as it would for a deployment."""

    def always(options):
        return lambda resources: options

    fixed = {"num_replicas": 2}
    expect(ray_serve.check_autoscaling(always(fixed)), checking.WRONG, "does not follow the load")
    no_scaling = {"ray_actor_options": {"num_gpus": 0}}
    expect(ray_serve.check_autoscaling(always(no_scaling)), checking.WRONG, "no `autoscaling_config`")
    refused = {"num_replicas": 2, "autoscaling_config": {"min_replicas": 1, "max_replicas": 2}}
    expect(ray_serve.check_autoscaling(always(refused)), checking.WRONG, "Serve refuses", "num_replicas is not allowed")
    bad_bounds = {"autoscaling_config": {"min_replicas": 3, "max_replicas": 2}}
    expect(ray_serve.check_autoscaling(always(bad_bounds)), checking.WRONG, "Serve refuses these options")
    to_zero = {"autoscaling_config": {"min_replicas": 0, "max_replicas": 4}}
    expect(ray_serve.check_autoscaling(always(to_zero)), checking.WRONG, "min_replicas=0", "Keep at least one")
    gpu_always = {"autoscaling_config": {"min_replicas": 1, "max_replicas": 4}, "ray_actor_options": {"num_gpus": 1}}
    expect(ray_serve.check_autoscaling(always(gpu_always)), checking.WRONG, "waits forever")
    expect(ray_serve.check_autoscaling(lambda r: {"min": 1, "max": 4}), checking.WRONG, "Serve refuses")

    def more_replicas_than_gpus(resources):
        scaling = {"min_replicas": 1, "max_replicas": 4}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if resources.get("GPU") else 0}}

    expect(ray_serve.check_autoscaling(more_replicas_than_gpus), checking.WRONG, "max_replicas=4 on a cluster with 3")

    def gpu_key_present(resources):
        top = min(4, int(resources.get("GPU", 4)))
        scaling = {"min_replicas": 1, "max_replicas": max(top, 2)}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if "GPU" in resources else 0}}

    expect(ray_serve.check_autoscaling(gpu_key_present), checking.WRONG, "GPU: 0.0")

    def never_scales(resources):  # a target no replica's load reaches: it takes 5 requests at a time
        gpus = int(resources.get("GPU", 0))
        scaling = {"min_replicas": 1, "max_replicas": min(4, gpus) if gpus else 4, "target_ongoing_requests": 1000}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if gpus else 0}}

    expect(ray_serve.check_autoscaling(never_scales), checking.WRONG, "target_ongoing_requests=1000", "never adds")

    def right(resources):
        gpus = int(resources.get("GPU", 0))
        scaling = {"min_replicas": 1, "max_replicas": min(4, gpus) if gpus else 4}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if gpus else 0}}

    expect(ray_serve.check_autoscaling(right), checking.DONE)

    def a_target_of_its_own(resources):  # below the 32 requests the lesson's Model takes at a time
        options = right(resources)
        options["autoscaling_config"]["target_ongoing_requests"] = 8
        return options

    expect(ray_serve.check_autoscaling(a_target_of_its_own), checking.DONE)
    expect(ray_serve.check_autoscaling(todo), checking.NOT_DONE)


def test_the_batching_check_refuses_a_replica_that_takes_fewer_requests_than_a_batch():
    """06.1: with `max_ongoing_requests=8` batches of 16 never fill; said before anything is deployed."""
    from ray import serve

    @serve.deployment(max_ongoing_requests=8)
    class EightAtATime:
        def __init__(self, score):
            self.score = score

        @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
        async def __call__(self, values):
            return self.score(values)

    expect(ray_serve.check_batching(EightAtATime), checking.WRONG, "max_ongoing_requests=8", "at least 16")


@pytest.mark.cluster
def test_the_batching_check():
    """06.1 runs each answer on Serve (on the test cluster, or a local Ray), Serve listening on a free loopback port."""
    import ray
    from ports import free_port
    from ray import serve

    from helpers.course.cluster import init_ray
    from helpers.pipeline.serving import PATIENT_CONTROLLER, serve_logging

    class NotADeployment:
        def __init__(self, score):
            self.score = score

    expect(ray_serve.check_batching(NotADeployment), checking.WRONG, "not a Serve deployment")

    @serve.deployment
    class Untouched:
        def __init__(self, score):
            self.score = score

        async def __call__(self, value):
            raise NotImplementedError

    @serve.deployment(max_ongoing_requests=32)
    class Right:
        def __init__(self, score):
            self.score = score

        @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
        async def __call__(self, values):
            return self.score(values)

    init_ray()
    expect(ray_serve.check_batching(Right), checking.WRONG, "Serve is not running")  # said before deploying anything
    serve.start(
        http_options={"host": "127.0.0.1", "port": free_port()},
        logging_config=serve_logging(),
        controller_options=PATIENT_CONTROLLER,
    )
    try:
        expect(ray_serve.check_batching(todo), checking.WRONG, "not a Serve deployment")
        untouched = ray_serve.check_batching(Untouched)
        expect(untouched, checking.NOT_DONE)

        @serve.deployment(max_ongoing_requests=32)
        class OneAtATime:  # no @serve.batch: score sees one value per call
            def __init__(self, score):
                self.score = score

            async def __call__(self, value):
                return self.score([value])[0]

        expect(ray_serve.check_batching(OneAtATime), checking.WRONG, "were not grouped", "@serve.batch")

        @serve.deployment  # max_ongoing_requests left at 5
        class FiveAtATime:
            def __init__(self, score):
                self.score = score

            @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
            async def __call__(self, values):
                return self.score(values)

        expect(ray_serve.check_batching(FiveAtATime), checking.WRONG, "max_ongoing_requests")

        @serve.deployment(max_ongoing_requests=32)
        class Reversed:
            def __init__(self, score):
                self.score = score

            @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
            async def __call__(self, values):
                return self.score(values)[::-1]

        expect(ray_serve.check_batching(Reversed), checking.WRONG, "the answer for another value")

        @serve.deployment(max_ongoing_requests=32)
        class OwnFormula:  # right numbers, but `score` bypassed
            def __init__(self, score):
                self.score = score

            @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
            async def __call__(self, values):
                return [2 * value + 1 for value in values]

        expect(ray_serve.check_batching(OwnFormula), checking.WRONG, "call `self.score`")

        expect(ray_serve.check_batching(Right), checking.DONE, "batches of up to")
        assert ray_serve.EXERCISE_APP not in serve.status().applications, "the check leaves its application deployed"
    finally:
        serve.shutdown()
        ray.shutdown()


def test_a_failure_in_ray_is_told_by_the_learners_own_error():
    """Ray wraps what the learner's code raised; the verdict names that, not Ray's wrapper or its retry advice."""
    ray_data = (
        "\x1b[36mray::MapWorker(MapBatches(Bad)).submit()\x1b[39m (pid=1, ip=127.0.0.1)\n"
        '  File "/tmp/x.py", line 7, in __call__\n    raise KeyError("pixel_values")\n'
        "KeyError: 'pixel_values'\n\nThe above exception was the direct cause of the following exception:\n\n"
        "\x1b[36mray::MapWorker(MapBatches(Bad)).submit()\x1b[39m (pid=1, ip=127.0.0.1)\n"
        "ray.exceptions.UserCodeException: UDF failed to process a data block.\n"
        "To change retry attempts, backoff, or which errors are retried, configure `ray.data.DataContext` if"
    )
    assert checking._failure(RuntimeError(ray_data)) == "KeyError: 'pixel_values'"
    train = "Training failed.\nTraceback (most recent call last):\n  File x\nValueError: no column `x`"
    assert checking._failure(RuntimeError(train)) == "ValueError: no column `x`"
