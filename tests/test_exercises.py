"""The exercises' checks: "not done yet" for an untouched exercise, a specific message for a typical wrong answer
(never an exception), and done for a right one. The solutions notebooks themselves run in test_solutions.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.train import ScalingConfig

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

    from helpers import config
    from helpers.cluster import configure_ray_data, init_ray
    from helpers.ingest import class_folders, keep_rgb

    init_ray()
    configure_ray_data()
    folders = class_folders(config.get_sources().imagenette, "train")
    dropped = lambda f: ray.data.read_images(f, include_paths=True).map_batches(keep_rgb)  # noqa: E731  (the lesson)
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


def test_the_autoscaling_check():
    """06.2 needs no cluster: Serve checks the options as it would for a deployment."""

    def always(options):
        return lambda resources: options

    fixed = {"num_replicas": 2}
    expect(exercises.check_autoscaling(always(fixed)), exercises.WRONG, "does not follow the load")
    no_scaling = {"ray_actor_options": {"num_gpus": 0}}
    expect(exercises.check_autoscaling(always(no_scaling)), exercises.WRONG, "no `autoscaling_config`")
    refused = {"num_replicas": 2, "autoscaling_config": {"min_replicas": 1, "max_replicas": 2}}
    expect(
        exercises.check_autoscaling(always(refused)), exercises.WRONG, "Serve refuses", "num_replicas is not allowed"
    )
    bad_bounds = {"autoscaling_config": {"min_replicas": 3, "max_replicas": 2}}
    expect(exercises.check_autoscaling(always(bad_bounds)), exercises.WRONG, "Serve refuses these options")
    to_zero = {"autoscaling_config": {"min_replicas": 0, "max_replicas": 4}}
    expect(exercises.check_autoscaling(always(to_zero)), exercises.WRONG, "min_replicas=0", "Keep at least one")
    gpu_always = {"autoscaling_config": {"min_replicas": 1, "max_replicas": 4}, "ray_actor_options": {"num_gpus": 1}}
    expect(exercises.check_autoscaling(always(gpu_always)), exercises.WRONG, "waits forever")
    expect(exercises.check_autoscaling(lambda r: {"min": 1, "max": 4}), exercises.WRONG, "Serve refuses")

    def more_replicas_than_gpus(resources):
        scaling = {"min_replicas": 1, "max_replicas": 4}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if resources.get("GPU") else 0}}

    expect(exercises.check_autoscaling(more_replicas_than_gpus), exercises.WRONG, "max_replicas=4 on a cluster with 3")

    def gpu_key_present(resources):
        top = min(4, int(resources.get("GPU", 4)))
        scaling = {"min_replicas": 1, "max_replicas": max(top, 2)}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if "GPU" in resources else 0}}

    expect(exercises.check_autoscaling(gpu_key_present), exercises.WRONG, "GPU: 0.0")

    def right(resources):
        gpus = int(resources.get("GPU", 0))
        scaling = {"min_replicas": 1, "max_replicas": min(4, gpus) if gpus else 4}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if gpus else 0}}

    expect(exercises.check_autoscaling(right), exercises.DONE)
    expect(exercises.check_autoscaling(todo), exercises.NOT_DONE)


@pytest.mark.cluster
def test_the_batching_check():
    """06.1 runs each answer on Serve (on the test cluster, or a local Ray), Serve listening on a free loopback port."""
    import ray
    from ports import free_port
    from ray import serve

    from helpers.cluster import init_ray
    from helpers.serving import PATIENT_CONTROLLER, serve_logging

    class NotADeployment:
        def __init__(self, score):
            self.score = score

    expect(exercises.check_batching(NotADeployment), exercises.WRONG, "not a Serve deployment")

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
    expect(exercises.check_batching(Right), exercises.WRONG, "Serve is not running")  # said before deploying anything
    serve.start(
        http_options={"host": "127.0.0.1", "port": free_port()},
        logging_config=serve_logging(),
        controller_options=PATIENT_CONTROLLER,
    )
    try:
        expect(exercises.check_batching(todo), exercises.WRONG, "not a Serve deployment")
        untouched = exercises.check_batching(Untouched)
        expect(untouched, exercises.NOT_DONE)

        @serve.deployment(max_ongoing_requests=32)
        class OneAtATime:  # no @serve.batch: score sees one value per call
            def __init__(self, score):
                self.score = score

            async def __call__(self, value):
                return self.score([value])[0]

        expect(exercises.check_batching(OneAtATime), exercises.WRONG, "were not grouped", "@serve.batch")

        @serve.deployment  # max_ongoing_requests left at 5
        class FiveAtATime:
            def __init__(self, score):
                self.score = score

            @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
            async def __call__(self, values):
                return self.score(values)

        expect(exercises.check_batching(FiveAtATime), exercises.WRONG, "max_ongoing_requests")

        @serve.deployment(max_ongoing_requests=32)
        class Reversed:
            def __init__(self, score):
                self.score = score

            @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
            async def __call__(self, values):
                return self.score(values)[::-1]

        expect(exercises.check_batching(Reversed), exercises.WRONG, "the answer for another value")

        @serve.deployment(max_ongoing_requests=32)
        class OwnFormula:  # right numbers, but `score` bypassed
            def __init__(self, score):
                self.score = score

            @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
            async def __call__(self, values):
                return [2 * value + 1 for value in values]

        expect(exercises.check_batching(OwnFormula), exercises.WRONG, "call `self.score`")

        expect(exercises.check_batching(Right), exercises.DONE, "batches of up to")
        assert exercises.EXERCISE_APP not in serve.status().applications, "the check leaves its application deployed"
    finally:
        serve.shutdown()
        ray.shutdown()
