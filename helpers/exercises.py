"""Checks for the "Your turn" exercises at the end of each notebook.

A check runs what the learner wrote (a function, a class) on a small input of its own and prints one
verdict: ``✓`` and what is right; ``✗`` with what is wrong and a hint toward the fix; or ``…`` "not done
yet" while the exercise still raises ``NotImplementedError``. A check never raises, so a notebook with
untouched exercises runs to its end. Every verdict is also saved in ``results/exercises/<notebook>.json``
(the tests of ``solutions/`` read it). The first message of a wrong answer points at the mistake; it
does not print the answer.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Mapping
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


# --- 02b: surviving a failure ---------------------------------------------------------------------------

RESUME_STEPS, RESUME_CRASH_AFTER = 7, 4  # the check's own run: count to 7; the worker dies after reporting step 4


def _not_started(function: Callable) -> bool:
    """True while the learner's function still has the exercise's ``raise NotImplementedError``."""
    try:
        return "raise NotImplementedError" in inspect.getsource(function)
    except (OSError, TypeError):  # no source to read: run it and see
        return False


class _Crash:
    """Remembers whether the check's worker has died yet: it dies once, whatever the learner's function reports."""

    def __init__(self) -> None:
        self.done = False

    def happened(self) -> bool:
        return self.done

    def now(self) -> bool:
        """True the first time only: the caller dies."""
        first, self.done = not self.done, True
        return first


def _dies_once(count_to: Callable[[dict], None], crash_after: int, crash: Any) -> Callable[[dict], None]:
    """``count_to`` as a Ray Train function whose worker dies once (the ``_Crash`` actor), after ``crash_after``.

    The worker is killed as the next step is about to be reported, a moment after the last report
    reached Ray Train: as a lost machine would be, between two checkpoints.
    """

    def train_func(loop_config: dict) -> None:
        import os
        import signal
        import time

        import ray
        import ray.train

        attempt = 2 if ray.get(crash.happened.remote()) else 1
        report = ray.train.report

        def report_or_die(metrics: dict, *args: Any, **kwargs: Any) -> None:
            if metrics.get("step") == crash_after + 1 and attempt == 1 and ray.get(crash.now.remote()):
                time.sleep(1.0)  # Ray Train collects the previous report
                os.kill(os.getpid(), signal.SIGKILL)
            report({**metrics, "attempt": attempt}, *args, **kwargs)

        ray.train.report = report_or_die
        try:
            count_to(loop_config)
        finally:
            ray.train.report = report

    return train_func


def check_resume(count_to: Callable[[dict], None], failure_config: Any) -> Verdict:
    """02b.1: ``count_to`` reports steps with checkpoints and resumes; ``failure_config`` allows a restart."""
    import ray
    import ray.train
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from helpers.config import run_name, storage_path
    from helpers.distributed import torch_config

    def run() -> str:
        if _not_started(count_to):
            raise _NotDone
        assert isinstance(failure_config, FailureConfig), (
            f"`failure_config` is {failure_config!r}: make it a `FailureConfig`, with the number of restarts allowed"
        )
        assert failure_config.max_failures == 1, (
            f"`max_failures={failure_config.max_failures}`: the exercise allows exactly one restart. "
            + (
                "-1 restarts without end: a job that fails every time would never stop. "
                if failure_config.max_failures < 0
                else ""
            )
        )
        crash = ray.remote(num_cpus=0)(_Crash).remote()
        trainer = TorchTrainer(
            _dies_once(count_to, RESUME_CRASH_AFTER, crash),
            train_loop_config={"steps": RESUME_STEPS},
            scaling_config=ScalingConfig(num_workers=1),
            torch_config=torch_config(),
            run_config=RunConfig(
                name=run_name("02b-exercise-count"),
                storage_path=storage_path(),
                failure_config=failure_config,
                logging_config=ray.train.LoggingConfig(log_level="ERROR"),
            ),
        )
        try:
            result = trainer.fit()
        except ray.train.TrainingFailedError as error:
            raise AssertionError(
                "the run failed: " + str(error).strip().splitlines()[-1][:200] + ". The worker dies only once: "
                "look for the error in your function"
            ) from None
        finally:
            ray.kill(crash)
        assert result.checkpoint is not None, (
            "no checkpoint was reported: pass `checkpoint=ray.train.Checkpoint.from_directory(folder)` to "
            "`ray.train.report`, or a restart has nothing to go on from"
        )
        reports = result.metrics_dataframe
        before, after = (reports.loc[reports["attempt"] == n, "step"].astype(int).tolist() for n in (1, 2))
        assert after, (
            f"the worker was to die after step {RESUME_CRASH_AFTER}, but the steps reported were {before}, with no "
            "restart: call `ray.train.report(...)` once per step, as the lesson does"
        )
        assert after[0] != 1, (
            f"after the restart your function counted from 1 again (steps reported before the crash: {before}, "
            f"after: {after}): start after the step saved in `ray.train.get_checkpoint()` when it is not None"
        )
        assert after[0] == before[-1] + 1, (
            f"the last checkpoint before the crash was step {before[-1]}, but after the restart your function went "
            f"on with step {after[0]}: save the step in each checkpoint and go on right after it"
        )
        assert after[-1] == RESUME_STEPS, (
            f"the last step reported is {after[-1]}, but `loop_config['steps']` was {RESUME_STEPS}: count to the "
            "number the loop config gives"
        )
        assert after == list(range(after[0], RESUME_STEPS + 1)), (
            f"after the restart the steps were {after}: report each step once, one after another"
        )
        restarted_at = after[0]
        return (
            f"the worker died after step {RESUME_CRASH_AFTER}; Ray Train restarted it and your function went on "
            f"from step {restarted_at - 1} to {RESUME_STEPS}"
        )

    return _check("02b.1", run)


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
