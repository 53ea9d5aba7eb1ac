"""The exercises' checks: "not done yet" for an untouched exercise, a specific message for a typical wrong answer
(never an exception), and done for a right one. The solutions notebooks themselves run in test_solutions.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.train import FailureConfig, ScalingConfig

from helpers import exercises
from helpers.models import standin_processor


@pytest.fixture(autouse=True)
def results_here(tmp_path, monkeypatch):
    monkeypatch.setattr(exercises, "RESULTS_DIR", tmp_path)


def todo(*args, **kwargs):
    raise NotImplementedError


def expect(verdict: exercises.Verdict, state: str, *phrases: str) -> None:
    assert verdict.state == state, verdict
    for phrase in phrases:
        assert phrase in verdict.message, verdict


def test_an_untouched_exercise_is_not_done_yet_and_is_recorded(capsys, tmp_path):
    verdict = exercises.check_freeze_backbone(todo)
    expect(verdict, exercises.NOT_DONE, "replace `raise NotImplementedError`")
    assert "… exercise 01.1: replace" in capsys.readouterr().out
    assert exercises.read("01", tmp_path)["01.1"]["state"] == exercises.NOT_DONE


def test_code_that_raises_is_a_finding_not_a_crash():
    expect(exercises.check_best_evaluation(lambda history: history["nope"]), exercises.WRONG, "it raised KeyError")


def test_freeze_backbone():
    def freeze_everything(model):
        for p in model.parameters():
            p.requires_grad = False

    def freeze_the_embeddings_only(model):
        for p in model.vit.embeddings.parameters():
            p.requires_grad = False

    expect(exercises.check_freeze_backbone(freeze_everything), exercises.WRONG, "no parameter trains any more")
    expect(exercises.check_freeze_backbone(freeze_the_embeddings_only), exercises.WRONG, "backbone parameters still")

    def right(model):
        for p in model.vit.parameters():
            p.requires_grad = False

    expect(exercises.check_freeze_backbone(right), exercises.DONE, "only the head trains")


def test_model_inputs():
    processor = standin_processor()

    def unresized(images, processor):
        return {"pixel_values": torch.stack([torch.zeros(3, 80, 80) for _ in images])}

    expect(
        exercises.check_model_inputs(unresized, processor),
        exercises.WRONG,
        "shape (4, 3, 80, 80)",
        "expects (4, 3, 64, 64)",
        "processor",
    )
    expect(exercises.check_model_inputs(lambda i, p: p(i), processor), exercises.WRONG, "return_tensors")
    not_normalised = lambda i, p: p(i, return_tensors="pt", do_normalize=False)  # noqa: E731
    expect(exercises.check_model_inputs(not_normalised, processor), exercises.WRONG, "not normalised", "do_normalize")

    def own_normalisation(images, processor):  # right shape and range, but not the processor's mean and std
        pixels = processor(images, return_tensors="pt", do_normalize=False)["pixel_values"]
        return {"pixel_values": pixels * 2 - 1.2}

    expect(exercises.check_model_inputs(own_normalisation, processor), exercises.WRONG, "call the processor itself")
    expect(exercises.check_model_inputs(lambda i, p: p(i, return_tensors="pt"), processor), exercises.DONE)


def test_best_evaluation():
    expect(
        exercises.check_best_evaluation(lambda h: (int(h["step"].iloc[-1]), float(h["eval_accuracy"].iloc[-1]))),
        exercises.WRONG,
        "you returned the last evaluation",
    )
    expect(
        exercises.check_best_evaluation(lambda h: (int(h["step"].iloc[h["eval_loss"].idxmin() + 1]), 0.89)),
        exercises.WRONG,
        "not the row with the highest `eval_accuracy`",
    )
    best = lambda h: (int(h.loc[h["eval_accuracy"].idxmax(), "step"]), float(h["eval_accuracy"].max()))  # noqa: E731
    expect(exercises.check_best_evaluation(best), exercises.DONE)


def test_scaling():
    def same_batch_everywhere(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers), global_batch

    def always_gpu(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu=True), global_batch // workers

    expect(exercises.check_scaling(same_batch_everywhere), exercises.WRONG, "divided by the number of workers")
    expect(exercises.check_scaling(always_gpu), exercises.WRONG, "never ask Ray for one it lacks")

    def gpu_key_present(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu="GPU" in resources), global_batch // workers

    expect(exercises.check_scaling(gpu_key_present), exercises.WRONG, "GPU: 0.0", "no GPU")

    def right(workers, global_batch, resources):
        return ScalingConfig(num_workers=workers, use_gpu=resources.get("GPU", 0) >= workers), global_batch // workers

    expect(exercises.check_scaling(right), exercises.DONE)


def test_resume_refuses_a_failure_config_that_is_missing_or_not_one_restart():
    def counter(loop_config):  # never run: the FailureConfig is refused first
        pass

    expect(exercises.check_resume(counter, None), exercises.WRONG, "make it a `FailureConfig`")
    expect(exercises.check_resume(counter, FailureConfig(max_failures=0)), exercises.WRONG, "exactly one restart")
    expect(exercises.check_resume(counter, FailureConfig(max_failures=-1)), exercises.WRONG, "would never stop")
    expect(exercises.check_resume(todo, FailureConfig(max_failures=1)), exercises.NOT_DONE)


@pytest.mark.cluster
def test_resume_runs_the_counter_on_ray_train_and_kills_its_worker_once():
    """02b.1 on Ray Train: the answers of a learner who half-understood are refused, the right one passes."""
    import tempfile
    from pathlib import Path

    import ray
    import ray.train

    from helpers.cluster import init_ray

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
    expect(exercises.check_resume(from_scratch, one_restart), exercises.WRONG, "counted from 1 again")
    no_checkpoint = lambda c: count(c, with_checkpoint=False)  # noqa: E731
    expect(exercises.check_resume(no_checkpoint, one_restart), exercises.WRONG, "no checkpoint was reported")
    ten_steps = lambda c: count(c, steps=10)  # noqa: E731
    expect(exercises.check_resume(ten_steps, one_restart), exercises.WRONG, "count to the number the loop config")
    expect(exercises.check_resume(count, one_restart), exercises.DONE, "went on")
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

    expect(exercises.check_mirror_half(upside_down), exercises.WRONG, "upside down", "width axis")
    expect(exercises.check_mirror_half(all_of_them), exercises.WRONG, "100% of the images")
    expect(exercises.check_mirror_half(half), exercises.DONE, "50% of 64 images")


def test_normalize_batch():
    def channels_last(batch):
        return {"image": batch["image"].astype(np.float32) / 127.5 - 1, "label": batch["label"]}

    def unscaled(batch):
        return {"image": batch["image"].astype(np.float32).transpose(0, 3, 1, 2), "label": batch["label"]}

    def right(batch):
        return {"image": (batch["image"].astype(np.float32) / 127.5 - 1).transpose(0, 3, 1, 2), "label": batch["label"]}

    expect(exercises.check_normalize_batch(channels_last), exercises.WRONG, "channels first")
    expect(exercises.check_normalize_batch(unscaled), exercises.WRONG, "from -1 to 1")
    expect(exercises.check_normalize_batch(right), exercises.DONE)


def test_schedule():
    def too_short(optimizer, total_steps):
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10 * total_steps)

    expect(exercises.check_schedule(lambda o, n: "cosine"), exercises.WRONG, "return a scheduler")
    expect(exercises.check_schedule(too_short), exercises.WRONG, "cover all `total_steps`")
    right = lambda o, n: torch.optim.lr_scheduler.LinearLR(o, 1.0, 0.0, total_iters=n)  # noqa: E731
    expect(exercises.check_schedule(right), exercises.DONE)


@pytest.mark.cluster
def test_the_ray_data_checks():
    """03.1, 05.1 and 05.2 run Ray Data: on the test cluster, or a local Ray."""
    import ray
    import ray.data
    from ray.data.expressions import col

    from helpers import config
    from helpers.cluster import configure_ray_data, init_ray
    from helpers.ingest import add_shapes, class_folders

    init_ray()
    configure_ray_data()
    folders = class_folders(config.get_sources().imagenette, "train")
    dropped = lambda f: (  # noqa: E731  (the lesson's read and filter)
        ray.data.read_images(f, include_paths=True).map_batches(add_shapes).filter(expr=col("channels") == 3)
    )
    expect(exercises.check_read_rgb(dropped, folders), exercises.WRONG, "none should be dropped")
    no_paths = lambda f: ray.data.read_images(f, mode="RGB")  # noqa: E731
    expect(exercises.check_read_rgb(no_paths, folders), exercises.WRONG, "include_paths=True")
    rgb = lambda f: ray.data.read_images(f, include_paths=True, mode="RGB")  # noqa: E731
    expect(exercises.check_read_rgb(rgb, folders), exercises.DONE, "every one with 3 channels")

    in_order = lambda ds, epoch: ds.to_pandas()["id"].to_numpy()  # noqa: E731
    same_seed = lambda ds, epoch: ds.random_shuffle(seed=0).to_pandas()["id"].to_numpy()  # noqa: E731
    expect(exercises.check_epoch_order(in_order), exercises.WRONG, "nothing was shuffled")
    expect(exercises.check_epoch_order(same_seed), exercises.WRONG, "epochs 0 and 1 give the same order")

    expect(exercises.check_cached(lambda ds: ds), exercises.WRONG, "a lazy dataset reruns every step")
    expect(exercises.check_cached(lambda ds: ds.materialize()), exercises.DONE)
    ray.shutdown()
