"""Checks for the "Your turn" exercises at the end of each notebook.

A check runs what the learner wrote (a function, a class) on a small input of its own and prints one
verdict: ``✓`` and what is right; ``✗`` with what is wrong and a hint toward the fix; or ``…`` "not done
yet" while the exercise still raises ``NotImplementedError``. A check never raises, so a notebook with
untouched exercises runs to its end. Every verdict is also saved in ``results/exercises/<notebook>.json``
(the tests of ``solutions/`` read it). The first message of a wrong answer points at the mistake; it
does not print the answer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from helpers.config import RESULTS_DIR

DONE, NOT_DONE, WRONG = "done", "not done yet", "not yet right"
MARKS = {DONE: "✓", NOT_DONE: "…", WRONG: "✗"}


@dataclass(frozen=True)
class Verdict:
    """What a check found: ``state`` is ``done``, ``not done yet`` or ``not yet right``."""

    exercise: str  # "02.1": notebook 02, exercise 1
    state: str
    message: str

    @property
    def done(self) -> bool:
        return self.state == DONE

    def __str__(self) -> str:
        return f"{MARKS[self.state]} exercise {self.exercise}: {self.message}"

    def _ipython_display_(self) -> None:
        """As a cell's last value, show nothing more: the check has printed the verdict already."""


class _NotDone(Exception):
    """The learner's code still raises NotImplementedError."""


class _Raised(Exception):
    """The learner's code raised something else: the message says what."""


def attempt(function: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's ``function``; its NotImplementedError means "not done yet", another error is a finding."""
    try:
        return function(*args, **kwargs)
    except NotImplementedError:
        raise _NotDone from None
    except Exception as error:
        raise _Raised(f"it raised {type(error).__name__}: {str(error).splitlines()[0][:160]}") from None


def exercises_path(exercise: str, results_dir: Path | None = None) -> Path:
    return (results_dir or RESULTS_DIR) / "exercises" / f"{exercise.split('.')[0]}.json"


def record(verdict: Verdict, results_dir: Path | None = None) -> Verdict:
    """Print ``verdict`` and keep it with the other verdicts of its notebook."""
    path = exercises_path(verdict.exercise, results_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = json.loads(path.read_text()) if path.exists() else {}
    kept[verdict.exercise] = asdict(verdict)
    path.write_text(json.dumps(kept, indent=2, sort_keys=True))
    print(verdict)
    return verdict


def read(notebook: str, results_dir: Path | None = None) -> dict[str, dict]:
    """The verdicts recorded for a notebook's exercises (``"02"``), by exercise."""
    path = exercises_path(f"{notebook}.0", results_dir)
    return json.loads(path.read_text()) if path.exists() else {}


def _check(exercise: str, run: Callable[[], str]) -> Verdict:
    """Run one check body: it returns the success message or raises AssertionError with the finding."""
    try:
        return record(Verdict(exercise, DONE, run()))
    except _NotDone:
        return record(Verdict(exercise, NOT_DONE, "replace `raise NotImplementedError` with your code, then run again"))
    except (_Raised, AssertionError) as finding:
        return record(Verdict(exercise, WRONG, str(finding)))


# --- 01: the Hugging Face fine-tune -------------------------------------------------------------------


def check_freeze_backbone(freeze_backbone: Callable[[torch.nn.Module], Any]) -> Verdict:
    """01.1: after ``freeze_backbone(model)``, only the classification head (``model.classifier``) trains."""
    from helpers.models import standin_vit

    def run() -> str:
        model = standin_vit(["dog", "fish"])
        attempt(freeze_backbone, model)
        trains = {name for name, p in model.named_parameters() if p.requires_grad}
        head = {name for name, _ in model.named_parameters() if name.startswith("classifier.")}
        assert trains, "no parameter trains any more: the head (`model.classifier`) must keep requires_grad=True"
        backbone = sorted(trains - head)
        assert not backbone, (
            f"{len(backbone)} backbone parameters still train (for example `{backbone[0]}`): "
            "the backbone is `model.vit`; its parameters need requires_grad=False"
        )
        assert trains == head, f"the head is frozen too ({sorted(head - trains)}): leave `model.classifier` trainable"
        total = sum(p.numel() for p in model.parameters())
        kept = sum(p.numel() for name, p in model.named_parameters() if name in trains)
        return f"only the head trains: {kept:,} of {total:,} parameters ({kept / total:.1%})"

    return _check("01.1", run)


def check_model_inputs(to_model_inputs: Callable, processor: Any) -> Verdict:
    """01.2: ``to_model_inputs(images, processor)`` gives the ``pixel_values`` the model takes, for PIL images."""
    from PIL import Image

    def run() -> str:
        rng = np.random.default_rng(0)
        images = [Image.fromarray(rng.integers(0, 256, (h, 48, 3), dtype=np.uint8)) for h in (40, 50, 60, 70)]
        inputs = attempt(to_model_inputs, images, processor)
        assert isinstance(inputs, Mapping) and "pixel_values" in inputs, (
            f"it returned {type(inputs).__name__}: the Trainer's model wants a dict with a `pixel_values` entry"
        )
        pixels = inputs["pixel_values"]
        assert isinstance(pixels, torch.Tensor), (
            f"`pixel_values` is a {type(pixels).__name__}: ask the processor for tensors (`return_tensors=...`)"
        )
        size = (processor.size["height"], processor.size["width"])
        assert tuple(pixels.shape[2:]) == size and pixels.shape[:2] == (4, 3), (
            f"your `pixel_values` have shape {tuple(pixels.shape)} for 4 images of different sizes; the model expects "
            f"(4, 3, {size[0]}, {size[1]}): did every image go through the processor (its size and channel order)?"
        )
        assert pixels.dtype == torch.float32 and float(pixels.abs().max()) <= 1.5, (
            f"values from {float(pixels.min()):.1f} to {float(pixels.max()):.1f}: the processor rescales and "
            "normalises; pass the PIL images themselves, not arrays you scaled"
        )
        expected = processor(images, return_tensors="pt")["pixel_values"]
        if not torch.allclose(pixels.float(), expected, atol=1e-3):
            assert float(pixels.min()) < 0 or float(expected.min()) >= 0, (
                f"values from {float(pixels.min()):.2f} to {float(pixels.max()):.2f}, never negative: the images were "
                "rescaled but not normalised by the processor's mean and std (leave `do_normalize` on)"
            )
            raise AssertionError(
                "the values differ from what the processor gives for the same images: call the processor itself "
                "with its own settings (size, rescaling, mean and std), on the PIL images"
            )
        return f"4 images of different sizes became pixel_values {tuple(pixels.shape)}, normalised"

    return _check("01.2", run)


# --- 02: Ray Train -------------------------------------------------------------------------------------


def made_up_history() -> pd.DataFrame:
    """A ``result.metrics_dataframe`` of a made-up run whose best evaluation is not its last."""
    return pd.DataFrame(
        {
            "step": [50, 100, 150, 200, 250, 300],
            "epoch": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
            "eval_loss": [0.9, 0.6, 0.45, 0.40, 0.42, 0.47],
            "eval_accuracy": [0.61, 0.78, 0.86, 0.91, 0.89, 0.88],
        }
    )


def check_best_evaluation(best_evaluation: Callable[[pd.DataFrame], tuple[int, float]]) -> Verdict:
    """02.1: ``best_evaluation(history)`` returns the step and accuracy of the best evaluation of a run."""

    def run() -> str:
        history = made_up_history()
        found = attempt(best_evaluation, history.copy())
        assert isinstance(found, tuple) and len(found) == 2, (
            f"it returned {found!r}: return a pair, (step, eval_accuracy)"
        )
        step, accuracy = found
        assert (step, accuracy) != (300, 0.88), (
            "you returned the last evaluation; the best one is where `eval_accuracy` is highest"
        )
        assert int(step) == 200 and math.isclose(float(accuracy), 0.91), (
            f"({step}, {accuracy}) is not the row with the highest `eval_accuracy`: look at the index that "
            "`history['eval_accuracy']` reaches its maximum at, and read `step` from that row"
        )
        return "step 200, accuracy 0.91 on the made-up history: try it on `result.metrics_dataframe` too"

    return _check("02.1", run)


def check_scaling(scaling_for: Callable[[int, int, dict[str, float]], tuple[Any, int]]) -> Verdict:
    """02.2: ``scaling_for(workers, global_batch, resources)`` gives a ScalingConfig and the per-worker batch."""
    from ray.train import ScalingConfig

    def run() -> str:
        config, per_worker = attempt(scaling_for, 4, 32, {"CPU": 8.0})
        assert isinstance(config, ScalingConfig), f"the first value is a {type(config).__name__}, not a ScalingConfig"
        assert config.num_workers == 4, f"asked for 4 workers, the ScalingConfig has {config.num_workers}"
        assert not config.use_gpu, "this cluster has no GPU ({'CPU': 8.0}): never ask Ray for one it lacks"
        assert per_worker * 4 == 32, (
            f"each of 4 workers takes {per_worker} examples, {per_worker * 4} a step in all: the global batch is "
            "32, so every worker's batch is the global one divided by the number of workers"
        )
        config, per_worker = attempt(scaling_for, 4, 64, {"CPU": 8.0, "GPU": 4.0})
        assert config.use_gpu, "this cluster has 4 GPUs: the workers should use them (use_gpu=True)"
        assert per_worker == 16, f"4 workers and a global batch of 64 give {per_worker} per worker"
        config, _ = attempt(scaling_for, 2, 64, {"CPU": 8.0, "GPU": 0.0})
        assert not config.use_gpu, (
            "`resources` lists GPU: 0.0 here: a GPU entry with the value 0 is no GPU. Decide from how many GPUs "
            "`resources` counts, not from whether the key is there"
        )
        return "4 workers of batch 8 on CPUs, 4 GPU workers of batch 16 when the cluster has GPUs"

    return _check("02.2", run)


# --- 03: Ray Data --------------------------------------------------------------------------------------


def check_read_rgb(read_rgb: Callable[[list[str]], Any], folders: list[str]) -> Verdict:
    """03.1: ``read_rgb(folders)`` reads every image of ``folders``, grayscale ones converted to 3 channels."""
    import ray.data

    from helpers.ingest import add_shapes  # the lesson's own count of channels

    def run() -> str:
        ds = attempt(read_rgb, folders)
        assert isinstance(ds, ray.data.Dataset), f"it returned a {type(ds).__name__}: return the Dataset itself"
        assert "path" in ds.columns(), (
            f"the dataset's columns are {ds.columns()}: keep each image's file path (`include_paths=True`), "
            "the lesson joins the labels on the file name"
        )
        files = ray.data.read_binary_files(folders).count()
        channels = ds.map_batches(add_shapes, batch_format="numpy").to_pandas()["channels"]
        assert len(channels) == files, (
            f"{len(channels)} images of the {files} files: none should be dropped this time, convert them instead"
        )
        gray = int((channels != 3).sum())
        assert not gray, f"{gray} images still have 1 channel: `read_images` can convert them as it reads"
        return f"all {files} images, every one with 3 channels (the lesson dropped the grayscale ones)"

    return _check("03.1", run)


def check_mirror_half(mirror_half: Callable[[dict], dict]) -> Verdict:
    """03.2: ``mirror_half(batch)`` mirrors about half of a batch's (H, W, C) images left to right, nothing else."""

    def run() -> str:
        rng = np.random.default_rng(0)
        images = rng.integers(0, 256, (64, 8, 10, 3), dtype=np.uint8)
        out = attempt(mirror_half, {"image": images.copy(), "label": np.arange(64)})
        assert isinstance(out, dict) and {"image", "label"} <= set(out), "return the batch: a dict with its columns"
        result = np.asarray(out["image"])
        assert result.shape == images.shape and result.dtype == images.dtype, (
            f"images came back {result.shape} {result.dtype}, went in {images.shape} {images.dtype}"
        )
        assert np.array_equal(out["label"], np.arange(64)), "the labels changed: mirror the images only"
        same = [np.array_equal(a, b) for a, b in zip(result, images, strict=True)]
        mirrored = [np.array_equal(a, b[:, ::-1]) for a, b in zip(result, images, strict=True)]
        upside_down = [np.array_equal(a, b[::-1]) for a, b in zip(result, images, strict=True)]
        assert not any(u and not s for u, s in zip(upside_down, same, strict=True)), (
            "some images are upside down: images are (height, width, channels), mirror along the width axis"
        )
        assert all(s or m for s, m in zip(same, mirrored, strict=True)), (
            "some images are neither unchanged nor mirrored left to right"
        )
        share = sum(m and not s for m, s in zip(mirrored, same, strict=True)) / 64
        assert 0.2 < share < 0.8, f"{share:.0%} of the images were mirrored: pick about half, at random"
        return f"{share:.0%} of 64 images mirrored left to right, the rest untouched, labels kept"

    return _check("03.2", run)


# --- 04: CIFAR-10 --------------------------------------------------------------------------------------


def check_normalize_batch(normalize_batch: Callable[[dict], dict]) -> Verdict:
    """04.1: ``normalize_batch(batch)`` for ``map_batches``: uint8 (N, H, W, C) to normalised float (N, C, H, W)."""
    from helpers.cifar import normalize

    def run() -> str:
        images = np.random.default_rng(0).integers(0, 256, (16, 32, 32, 3), dtype=np.uint8)
        out = attempt(normalize_batch, {"image": images.copy(), "label": np.arange(16)})
        result = np.asarray(out["image"])
        assert result.shape == (16, 3, 32, 32), (
            f"images of shape {result.shape}: the model takes channels first, (N, 3, 32, 32)"
        )
        assert result.dtype == np.float32, f"{result.dtype} images: the model takes float32"
        assert np.allclose(result, normalize(images), atol=1e-5), (
            f"values from {result.min():.2f} to {result.max():.2f}; the lesson's images go from -1 to 1: scale "
            "to [0, 1] first, then subtract the mean and divide by the standard deviation (0.5 each)"
        )
        assert np.array_equal(out["label"], np.arange(16)), "the labels changed: keep them as they are"
        return "the same values as the lesson's `normalize`, ready for `map_batches`"

    return _check("04.1", run)


def check_schedule(make_schedule: Callable[[torch.optim.Optimizer, int], Any]) -> Verdict:
    """04.2: ``make_schedule(optimizer, total_steps)`` lowers the learning rate to near 0 by the last step."""

    def run() -> str:
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        schedule = attempt(make_schedule, optimizer, 100)
        assert isinstance(schedule, torch.optim.lr_scheduler.LRScheduler), (
            f"it returned a {type(schedule).__name__}: return a scheduler from torch.optim.lr_scheduler"
        )
        rates = []
        for _ in range(100):
            rates.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
        assert max(rates) <= 0.1 + 1e-9, f"the rate reached {max(rates):.3f}, above the optimizer's 0.1"
        assert rates[-1] < 0.01, (
            f"after 100 steps the rate is still {rates[-1]:.4f} (it started at {rates[0]:.3f}): the schedule must "
            "cover all `total_steps`, and call `schedule.step()` once per optimizer step"
        )
        return f"the rate goes from {rates[0]:.3f} to {rates[-1]:.4f} over 100 steps"

    return _check("04.2", run)


# --- 05: the data-loading playbook ---------------------------------------------------------------------


def check_epoch_order(epoch_order: Callable[[Any, int], np.ndarray]) -> Verdict:
    """05.1: ``epoch_order(ds, epoch)``: a shuffled order of the ids, the same on every run, new every epoch."""
    import ray.data

    def run() -> str:
        ds = ray.data.range(2000, override_num_blocks=10)
        first, again, other = (np.asarray(attempt(epoch_order, ds, epoch)) for epoch in (0, 0, 1))
        assert sorted(first.tolist()) == list(range(2000)), (
            f"{len(first)} ids, {len(set(first.tolist()))} distinct: every id once, in some order"
        )
        assert not np.array_equal(first, np.arange(2000)), "the ids come back in order: nothing was shuffled"
        assert np.array_equal(first, again), (
            "two runs of epoch 0 gave different orders: every random step needs a seed (`random_shuffle(seed=)`, "
            "`local_shuffle_seed`), and the blocks must come out in order (`preserve_order`, section 6)"
        )
        assert not np.array_equal(first, other), "epochs 0 and 1 give the same order: let the seed depend on the epoch"
        return "the same shuffled order for the same epoch, another one for the next epoch"

    return _check("05.1", run)


def check_cached(cached: Callable[[Any], Any]) -> Verdict:
    """05.2: ``cached(ds)`` runs the dataset's expensive steps once and keeps the result."""
    import ray.data
    from ray.data.dataset import MaterializedDataset

    def run() -> str:
        ds = ray.data.range(100, override_num_blocks=4).map_batches(lambda batch: {"id": batch["id"] * 2})
        kept = attempt(cached, ds)
        assert isinstance(kept, MaterializedDataset), (
            f"it returned a {type(kept).__name__}: a lazy dataset reruns every step each epoch; one method "
            "runs them now and keeps the blocks in the object store"
        )
        ids = sorted(kept.to_pandas()["id"].tolist())
        assert ids == [2 * i for i in range(100)], "the rows changed: keep the dataset's own steps, add nothing"
        return f"materialized: {kept.num_blocks()} blocks in the object store, the same 100 rows"

    return _check("05.2", run)


# --- 06: Ray Serve -------------------------------------------------------------------------------------

EXERCISE_APP = "exercise-06"  # the application a check deploys, and deletes again


def score_batch(values: list[float]) -> list[tuple[float, int]]:
    """06.1's model: scores a whole list of numbers in one call, each answer with the size of the list it came in."""
    return [(round(2 * value + 1, 6), len(values)) for value in values]


def _serve_is_running() -> bool:
    from ray import serve

    return bool(serve.status().proxies)


def _call_once(deployment: Any) -> None:
    """Call the class of ``deployment`` once, here, outside Serve: raises ``_NotDone`` if it is still a stub.

    Anything else it raises is left for the check to find when it runs the deployment on Serve."""
    import asyncio
    import inspect

    async def call() -> None:
        result = deployment.func_or_class(score_batch)(1)
        if inspect.isawaitable(result):
            await asyncio.wait_for(result, timeout=10)

    try:
        asyncio.run(call())
    except NotImplementedError:
        raise _NotDone from None
    except Exception:  # noqa: S110  (a right answer may need Serve to run at all)
        pass


def check_batching(deployment: Any, max_batch_size: int = 16) -> Verdict:
    """06.1: ``deployment``, bound to a scoring function, groups requests arriving one at a time into batches."""
    from ray import serve
    from ray.serve import Deployment

    def run() -> str:
        if not isinstance(deployment, Deployment):
            raise AssertionError(
                f"it is a {type(deployment).__name__}, not a Serve deployment: decorate the class with "
                "`@serve.deployment` (and its method with `@serve.batch`)"
            )
        with ThreadPoolExecutor(max_workers=1) as pool:  # untouched? find out here, without starting a replica
            pool.submit(_call_once, deployment).result()
        assert _serve_is_running(), "Serve is not running here: run the lesson's cell with `serve.start(...)` first"
        values = np.random.default_rng().integers(0, 1000, 48).tolist()  # 48 requests at once, one value each

        def deploy_and_call() -> list:  # in a thread of its own: a notebook's event loop forbids waiting in it
            handle = attempt(serve.run, deployment.bind(score_batch), name=EXERCISE_APP, route_prefix=None)
            responses = [handle.remote(value) for value in values]
            return [attempt(response.result, timeout_s=120) for response in responses]

        try:
            with ThreadPoolExecutor(max_workers=1) as pool:
                answers = pool.submit(deploy_and_call).result()
        finally:
            serve.delete(EXERCISE_APP)
        for value, answer in zip(values, answers, strict=True):
            assert isinstance(answer, tuple | list) and len(answer) == 2, (
                f"a request for {value} got {answer!r}: answer each request with what `score` returned for its value "
                "(call `self.score` with the whole batch)"
            )
            assert answer[0] == 2 * value + 1, (
                f"the request for {value} got the answer for another value ({answer[0]}): return `score`'s answers "
                "in the order of the batch, one per request"
            )
        sizes = sorted({int(answer[1]) for answer in answers})
        assert max(sizes) > 1, (
            "every call of `score` had one value: the requests were not grouped. Decorate the method with "
            f"`@serve.batch(max_batch_size={max_batch_size})` and let it take a list of values"
        )
        assert max(sizes) <= max_batch_size, (
            f"a batch of {max(sizes)} values: keep batches to {max_batch_size} (`max_batch_size`)"
        )
        assert max(sizes) > 5, (
            f"48 requests at once, yet batches of at most {max(sizes)}: a replica takes only `max_ongoing_requests` "
            f"requests at a time (5 by default); raise it to at least {max_batch_size} in `@serve.deployment(...)`"
        )
        return f"48 requests arriving one at a time were answered in batches of up to {max(sizes)}, each answer its own"

    return _check("06.1", run)


def check_autoscaling(scaling_options: Callable[[dict[str, float]], dict]) -> Verdict:
    """06.2: ``scaling_options(resources)`` gives a model deployment's ``.options(...)``: it scales with the load,
    keeps a replica ready, and asks for one GPU per replica only on a cluster with GPUs, no more replicas than GPUs."""
    from ray import serve

    @serve.deployment
    class Model:  # what the options go to: Serve checks them as it would for the lesson's Model
        pass

    def options_for(resources: dict[str, float]) -> tuple[dict, Any]:
        options = attempt(scaling_options, dict(resources))
        assert isinstance(options, Mapping), f"it returned a {type(options).__name__}: return the dict for `.options`"
        try:
            configured = Model.options(**options)
        except Exception as error:  # Serve refuses the options: its message says why
            raise AssertionError(
                f"Serve refuses these options ({type(error).__name__}: {str(error).splitlines()[0][:200]})"
            ) from None
        return dict(options), configured

    def run() -> str:
        options, configured = options_for({"CPU": 8.0})
        assert "num_replicas" not in options or options["num_replicas"] == "auto", (
            "a fixed `num_replicas` does not follow the load: give an `autoscaling_config` instead"
        )
        scaling = configured._deployment_config.autoscaling_config
        assert scaling is not None, (
            "no `autoscaling_config`: without it the deployment keeps one replica whatever the load"
        )
        assert scaling.min_replicas >= 1, (
            f"min_replicas={scaling.min_replicas}: with no replica kept, the first request after a quiet spell waits "
            "for a replica to start and load the model (seconds). Keep at least one"
        )
        assert scaling.max_replicas > scaling.min_replicas, (
            f"min_replicas={scaling.min_replicas} and max_replicas={scaling.max_replicas}: nothing can scale; let "
            "max_replicas be higher"
        )
        gpus = (options.get("ray_actor_options") or {}).get("num_gpus", 0)
        assert not gpus, "this cluster has no GPU ({'CPU': 8.0}): a replica that asks for one waits forever"
        options, configured = options_for({"CPU": 32.0, "GPU": 3.0})
        actor = options.get("ray_actor_options") or {}
        assert actor.get("num_gpus") == 1, (
            f"on a cluster with 3 GPUs each replica should get one: `ray_actor_options={{'num_gpus': 1}}` "
            f"(it asks for {actor.get('num_gpus', 0)})"
        )
        scaling = configured._deployment_config.autoscaling_config
        assert scaling is not None and scaling.max_replicas <= 3, (
            f"max_replicas={getattr(scaling, 'max_replicas', None)} on a cluster with 3 GPUs, one per replica: the "
            "replicas beyond 3 would wait forever for a GPU. Take the smaller of your maximum and the GPUs"
        )
        options, _ = options_for({"CPU": 8.0, "GPU": 0.0})
        assert not (options.get("ray_actor_options") or {}).get("num_gpus"), (
            "`resources` lists GPU: 0.0 here: a GPU entry with the value 0 is no GPU. Decide from how many GPUs "
            "`resources` counts, not from whether the key is there"
        )
        return "it scales with the load, keeps a replica ready, and takes one GPU per replica only where there are GPUs"

    return _check("06.2", run)
