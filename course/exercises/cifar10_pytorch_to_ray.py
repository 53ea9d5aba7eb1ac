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
from course.exercises.cifar10_judge import hidden_model, hidden_problem, judge_train_run, raised_finding
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
    (``train_runs.fit_locally``), judged as a run on workers is (:func:`judge_train_run`), but for what needs two
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
            raise AssertionError(raised_finding(first_line(error), local=True)) from None
        except NotImplementedError:
            raise NotDone from None
        except Exception as error:  # the learner's own error, as it is (local mode does not wrap it)
            raise AssertionError(raised_finding(first_line(error), local=True)) from None
        calls = reports.state()["calls"]
        judge_train_run(kept.result(), seen.table(), problem["epochs"], WEIGHTS_FILE, 1, calls, **problem["asked"])
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
                raise AssertionError(raised_finding(found)) from None
            calls = ray.get(reports.state.remote())["calls"]
            seen = ray.get(tally.table.remote())
        finally:  # the check's own actors end with it, whatever the run did (a failed run leaves its handles held)
            ray.kill(reports)
            ray.kill(tally)
        return judge_train_run(result, seen, epochs, WEIGHTS_FILE, workers, calls, batch_size=batch_size, lr=lr)

    return check(
        "04.2", run, limit_s=RUN_LIMIT_S + 60, ray_first=lambda: not untouched(train_from_shard), locally=locally
    )
