"""Checks for the "Your turn" exercises at the end of each notebook.

A check runs what the learner wrote (a function, a class) on a small input of its own and prints one
verdict: ``✓`` and what is right; ``✗`` with what is wrong and a hint toward the fix; or ``…`` "not done
yet" while the exercise still raises ``NotImplementedError``. A check never raises and never hangs: it
runs in a thread of its own with a time limit (``_check``), so any answer, of any shape, gets a verdict
within that limit and a notebook with untouched exercises runs to its end. The checks that run the
learner's function on Ray Train workers also watch every worker (``_run_watched``): a worker that waits
at ``ray.train.report`` for a worker that has reported fewer times and ended (or has not come for
``BARRIER_WAIT_S``), or that runs past its own limit, is stopped, and the verdict names the rule it
broke. Every verdict is also saved in ``results/exercises/<notebook>.json`` (the tests of ``solutions/``
read it). The first message of a wrong answer points at the mistake; it does not print the answer.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import math
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from helpers.config import RESULTS_DIR, publish_folder, remove, shared_path

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


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:160]}" if text else type(error).__name__


def _check(
    exercise: str,
    run: Callable[[], str],
    limit_s: float = 60,
    late: str = "",
    ray_first: Callable[[], bool] | None = None,
) -> Verdict:
    """Run one check body in a thread of its own, for at most ``limit_s`` seconds: the body returns the success
    message or raises AssertionError with the finding. Whatever else happens is a verdict too: an exception of the
    check itself (an answer of a shape it did not expect) or a body still running at the limit (``late`` says
    what to look for). The verdict is printed here, in the caller's thread.

    When ``ray_first()`` says so (an answer worth running on Ray), Ray is attached here first, in the caller's
    thread: ``ray.init`` sets its signal handlers only in the main thread, and says so on stderr elsewhere."""
    outcome: list[Verdict] = []
    try:
        if ray_first is not None and ray_first():
            _attached()
    except Exception as error:  # noqa: BLE001  (the body says what it finds; Ray is attached there again)
        logging.getLogger(__name__).debug("attaching Ray first: %s", error)

    def body() -> None:
        try:
            outcome.append(Verdict(exercise, DONE, run()))
        except _NotDone:
            outcome.append(
                Verdict(exercise, NOT_DONE, "replace `raise NotImplementedError` with your code, then run again")
            )
        except (_Raised, AssertionError) as finding:
            outcome.append(Verdict(exercise, WRONG, str(finding)))
        except BaseException as error:  # noqa: BLE001  (a check never raises: SystemExit from learner code included)
            outcome.append(
                Verdict(
                    exercise,
                    WRONG,
                    f"the check could not use what your code gave it ({_first_line(error)}): compare what your code "
                    "returns (its type, its shape) with what the exercise asks for",
                )
            )

    thread = threading.Thread(target=body, name=f"check-{exercise}", daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive() or not outcome:
        return record(
            Verdict(
                exercise,
                WRONG,
                f"no verdict within the check's time limit of {limit_s:.0f} s: your code was still running. "
                + (late or "Look for a loop that never ends, or a wait for something that never comes"),
            )
        )
    return record(outcome[0])


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
    """A ``result.metrics_dataframe`` of a made-up run whose best evaluation is neither its last nor the one with the
    lowest ``eval_loss``: the loss keeps falling a little after the accuracy has peaked."""
    return pd.DataFrame(
        {
            "step": [50, 100, 150, 200, 250, 300],
            "epoch": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
            "eval_loss": [0.9, 0.6, 0.45, 0.40, 0.38, 0.47],
            "eval_accuracy": [0.61, 0.78, 0.86, 0.91, 0.89, 0.88],
        }
    )


def _pair(found: Any, what: str) -> tuple[Any, Any]:
    """The two values of a learner's answer that should be a pair; an AssertionError naming ``what`` otherwise."""
    assert isinstance(found, tuple | list) and len(found) == 2, (
        f"it returned {type(found).__name__} {str(found)[:80]!r}: return a pair, {what}"
    )
    return found[0], found[1]


def check_best_evaluation(best_evaluation: Callable[[pd.DataFrame], tuple[int, float]]) -> Verdict:
    """02.1: ``best_evaluation(history)`` returns the step and accuracy of the evaluation with the highest accuracy."""

    def run() -> str:
        history = made_up_history()
        step, accuracy = _pair(attempt(best_evaluation, history.copy()), "(step, eval_accuracy)")
        assert (step, accuracy) != (300, 0.88), (
            "you returned the last evaluation; the best one is where `eval_accuracy` is highest"
        )
        assert int(step) != 250, (
            "you returned the evaluation with the lowest `eval_loss` (step 250); the exercise asks for the highest "
            "`eval_accuracy`: the loss can go on falling after the accuracy has peaked"
        )
        assert int(step) == 200 and math.isclose(float(accuracy), 0.91), (
            f"({step}, {accuracy}) is not the row with the highest `eval_accuracy`: look at the index that "
            "`history['eval_accuracy']` reaches its maximum at, and read `step` from that row"
        )
        later = history.iloc[1:].copy()  # a history whose index does not start at 0 (a row dropped, as by a filter)
        later["eval_accuracy"] = [0.70, 0.75, 0.80, 0.93, 0.85]
        step, accuracy = _pair(attempt(best_evaluation, later), "(step, eval_accuracy)")
        assert int(step) == 250 and math.isclose(float(accuracy), 0.93), (
            f"on a history whose rows are numbered 1 to 5, it returned ({step}, {accuracy}) instead of (250, 0.93): "
            "`idxmax()` gives the row's *label*; read the row with `.loc`, not `.iloc`"
        )
        return "step 200, accuracy 0.91 on the made-up history: try it on `result.metrics_dataframe` too"

    return _check("02.1", run)


def check_scaling(scaling_for: Callable[[int, int, dict[str, float]], tuple[Any, int]]) -> Verdict:
    """02.2: ``scaling_for(workers, global_batch, resources)`` gives a ScalingConfig and the per-worker batch."""
    from ray.train import ScalingConfig

    def scaled(workers: int, batch: int, resources: dict[str, float]) -> tuple[Any, Any]:
        config, per_worker = _pair(
            attempt(scaling_for, workers, batch, dict(resources)), "(ScalingConfig, the batch of each worker)"
        )
        assert isinstance(config, ScalingConfig), f"the first value is a {type(config).__name__}, not a ScalingConfig"
        assert isinstance(per_worker, int | np.integer), (
            f"each worker's batch is {per_worker!r}, a {type(per_worker).__name__}: a batch size is a whole number "
            "(divide with `//`)"
        )
        return config, int(per_worker)

    def run() -> str:
        config, per_worker = scaled(4, 32, {"CPU": 8.0})
        assert config.num_workers == 4, f"asked for 4 workers, the ScalingConfig has {config.num_workers}"
        assert not config.use_gpu, "this cluster has no GPU ({'CPU': 8.0}): never ask Ray for one it lacks"
        assert per_worker * 4 == 32, (
            f"each of 4 workers takes {per_worker} examples, {per_worker * 4} a step in all: the global batch is "
            "32, so every worker's batch is the global one divided by the number of workers"
        )
        config, per_worker = scaled(4, 64, {"CPU": 8.0, "GPU": 4.0})
        assert config.use_gpu, "this cluster has 4 GPUs: the workers should use them (use_gpu=True)"
        assert per_worker == 16, f"4 workers and a global batch of 64 give {per_worker} per worker"
        config, per_worker = scaled(3, 96, {"CPU": 6.0})
        assert config.num_workers == 3 and per_worker == 32, (
            f"3 workers and a global batch of 96 gave {config.num_workers} workers of {per_worker}: use the "
            "arguments, not the lesson's numbers"
        )
        config, _ = scaled(2, 64, {"CPU": 8.0, "GPU": 0.0})
        assert not config.use_gpu, (
            "`resources` lists GPU: 0.0 here: a GPU entry with the value 0 is no GPU. Decide from how many GPUs "
            "`resources` counts, not from whether the key is there"
        )
        return "4 workers of batch 8 on CPUs, 4 GPU workers of batch 16 when the cluster has GPUs"

    return _check("02.2", run)


# --- 02b: surviving a failure ---------------------------------------------------------------------------

RESUME_STEPS, RESUME_CRASH_AFTER = 7, 4  # the check's own run: count to 7; a worker dies after reporting step 4
RESUME_WORKERS = 2  # on one worker, reporting on rank 0 only would pass: with two it would hang (see _run_watched)
WORKER_LIMIT_S = 150  # how long a check's Ray Train worker may run the learner's function
BARRIER_WAIT_S = 45  # how long a worker may wait in a report while another worker has reported fewer times
RUN_LIMIT_S = 420  # how long a check waits for its Ray Train run (start-up, a restart, the learner's function)


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


class _Reports:
    """What each worker of a check's Ray Train run did with ``ray.train.report``, kept where the driver reads it.

    Workers are named ``"<attempt>/<rank>"``; each call is a dict (``checkpoint``: whether one was attached, and
    what the check measured around it)."""

    def __init__(self) -> None:
        self.calls: dict[str, list[dict]] = {}
        self.ended: dict[str, int] = {}  # calls made when the worker's function returned
        self.stopped: list[dict] = []  # workers the check stopped, and why

    def begin(self, worker: str) -> bool:
        """``worker``'s function starts; False when the check has stopped a worker of this run already."""
        self.calls.setdefault(worker, [])
        return not self.stopped

    def called(self, worker: str, call: dict) -> None:
        self.calls.setdefault(worker, []).append(call)

    def end(self, worker: str) -> None:
        self.ended[worker] = len(self.calls.get(worker, []))

    def waits_in_vain(self, worker: str, calls: int, waited_s: float) -> str | None:
        """Another worker of the same attempt that made fewer calls than ``worker`` has, and either ended (it will
        never come) or has not come for ``BARRIER_WAIT_S`` seconds while ``worker`` waits in its report. Ray Train
        V2's report is a barrier that every worker must reach."""
        attempt = worker.split("/")[0]
        for other in self.calls:  # every worker that began, reported or not
            if other == worker or other.split("/")[0] != attempt:
                continue
            made = self.ended.get(other, len(self.calls.get(other, [])))
            if made < calls and (other in self.ended or waited_s > BARRIER_WAIT_S):
                return other
        return None

    def stop(self, why: dict) -> None:
        self.stopped.append(why)

    def state(self) -> dict:
        return {"calls": self.calls, "ended": self.ended, "stopped": self.stopped}


def _run_watched(
    learner: Callable[[dict], Any],
    loop_config: dict,
    reports: Any,
    attempt: int = 1,
    limit_s: float = WORKER_LIMIT_S,
    before_report: Callable[[dict], None] | None = None,
    measure: Callable[[], dict] | None = None,
) -> None:
    """Run the learner's Ray Train function on this worker with its ``ray.train.report`` calls counted in
    ``reports`` (a ``_Reports`` actor). A watchdog stops this worker (its process ends, as a lost machine's would)
    when it waits at a report that another worker will never reach, or when it runs past ``limit_s``: the run then
    fails, and the check reads why from ``reports``. ``before_report(metrics)`` runs before each report (02b's
    crash); ``measure()`` adds what the check measured to each call's entry (04.2's batch losses)."""
    import os
    import signal
    import time

    import ray
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    worker = f"{attempt}/{rank}"
    if not ray.get(reports.begin.remote(worker)):  # an earlier attempt was stopped: no second wait
        raise RuntimeError("the check stopped this run")
    real = ray.train.report
    now = {"calls": 0, "in_report": False, "since": 0.0}

    def report(metrics: Any, *args: Any, **kwargs: Any) -> None:
        now["calls"] += 1
        checkpoint = kwargs.get("checkpoint", args[0] if args else None)
        entry: dict[str, Any] = {"checkpoint": checkpoint is not None}
        if isinstance(metrics, dict) and isinstance(metrics.get("loss"), int | float):
            entry["loss"] = float(metrics["loss"])
        ray.get(reports.called.remote(worker, entry | (measure() if measure else {})))
        if before_report is not None and isinstance(metrics, dict):
            before_report(metrics)
        now["in_report"], now["since"] = True, time.monotonic()
        try:
            real({**metrics, "attempt": attempt} if isinstance(metrics, dict) else metrics, *args, **kwargs)
        finally:
            now["in_report"] = False

    ended = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + limit_s
        while not ended.wait(1.0):
            waited_s = time.monotonic() - now["since"]
            waited_for = now["in_report"] and ray.get(reports.waits_in_vain.remote(worker, now["calls"], waited_s))
            if waited_for or time.monotonic() > deadline:
                why = {"worker": worker, "calls": now["calls"], "in_report": now["in_report"], "waited_for": waited_for}
                ray.get(reports.stop.remote(why))
                os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()
    ray.train.report = report
    try:
        learner(loop_config)
    finally:
        ray.train.report = real
        ended.set()
        ray.get(reports.end.remote(worker))


def _stopped_finding(stopped: list[dict], limit_s: float) -> str:
    """What a check says of a run whose worker it stopped: the rule the learner's function broke."""
    why = stopped[0]
    rank, calls = why["worker"].split("/")[1], why["calls"]
    if why["waited_for"]:
        other = why["waited_for"].split("/")[1]
        return (
            f"worker {rank} called `ray.train.report` {calls} time(s), worker {other} fewer: `ray.train.report` "
            f"waits until every worker has called it, so worker {rank} would have waited forever (the check "
            "stopped it). Every worker calls `ray.train.report`, as often as the others; only rank 0 attaches a "
            "checkpoint (the others pass `checkpoint=None`)"
        )
    where = f"in its call number {calls} of `ray.train.report`" if why["in_report"] else "outside `ray.train.report`"
    return (
        f"worker {rank} was still running your function after {limit_s:.0f} s, {where}: look for a loop that never "
        "ends, or a wait for something that never comes. Remember that `ray.train.report` waits until every "
        "worker has called it"
    )


def _fit_within(trainer: Any, limit_s: float = RUN_LIMIT_S) -> Any:
    """``trainer.fit()`` in a thread, waited for at most ``limit_s`` seconds: its result, or its exception raised
    here; an AssertionError when the run is still going at the limit (left running: Ray Train has no public way to
    stop it from here)."""
    outcome: list = []

    def fit() -> None:
        try:
            outcome.append(("result", trainer.fit()))
        except BaseException as error:  # noqa: BLE001  (raised again in the caller's thread)
            outcome.append(("error", error))

    thread = threading.Thread(target=fit, name="check-fit", daemon=True)
    thread.start()
    thread.join(limit_s)
    if not outcome:
        raise AssertionError(
            f"the run did not finish within {limit_s:.0f} s: were its workers ever started (enough free CPUs on the "
            "cluster)? Does your function end?"
        )
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value


def _dies_once(count_to: Callable[[dict], None], crash_after: int, crash: Any, reports: Any) -> Callable[[dict], None]:
    """``count_to`` as a Ray Train function, watched (``_run_watched``), whose last worker dies once (the ``_Crash``
    actor), after ``crash_after``.

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
        context = ray.train.get_context()
        last = context.get_world_rank() == context.get_world_size() - 1

        def die_before(metrics: dict) -> None:
            if last and metrics.get("step") == crash_after + 1 and attempt == 1 and ray.get(crash.now.remote()):
                time.sleep(1.0)  # Ray Train collects the previous report
                os.kill(os.getpid(), signal.SIGKILL)

        _run_watched(count_to, loop_config, reports, attempt, before_report=die_before)

    return train_func


def check_resume(count_to: Callable[[dict], None], failure_config: Any) -> Verdict:
    """02b.1: ``count_to`` reports steps with checkpoints and resumes; ``failure_config`` allows a restart. The check
    runs it on 2 workers and kills the last one once."""
    import ray
    import ray.train
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from helpers.config import run_name, storage_path
    from helpers.distributed import torch_config

    def run() -> str:
        if untouched(count_to):
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
        _attached()
        crash = ray.remote(num_cpus=0)(_Crash).remote()
        reports = ray.remote(num_cpus=0)(_Reports).remote()
        trainer = TorchTrainer(
            _dies_once(count_to, RESUME_CRASH_AFTER, crash, reports),
            train_loop_config={"steps": RESUME_STEPS},
            scaling_config=ScalingConfig(num_workers=RESUME_WORKERS),
            torch_config=torch_config(),
            run_config=RunConfig(
                name=run_name("02b-exercise-count"),
                storage_path=storage_path(),
                failure_config=failure_config,
                logging_config=ray.train.LoggingConfig(log_level="ERROR"),
            ),
        )
        try:
            result = _fit_within(trainer)
        except ray.train.TrainingFailedError as error:
            stopped = ray.get(reports.state.remote())["stopped"]
            if stopped:
                raise AssertionError(_stopped_finding(stopped, WORKER_LIMIT_S)) from None
            raise AssertionError(
                f"the run failed: {_failure(error)}. The worker dies only once: look for the error in your function"
            ) from None
        finally:
            ray.kill(crash)
            ray.kill(reports)
        assert result.checkpoint is not None, (
            "no checkpoint was reported: pass `checkpoint=ray.train.Checkpoint.from_directory(folder)` to "
            "`ray.train.report`, or a restart has nothing to go on from"
        )
        reports = result.metrics_dataframe
        keys = sorted(set(reports.columns) - {"attempt"}) if reports is not None else []
        assert "step" in keys, (
            f"your reports hold {keys}, no `step`: report each step as `ray.train.report({{'step': step}}, "
            "checkpoint=...)`; the check reads it by that name"
        )
        before, after = (reports.loc[reports["attempt"] == n, "step"].astype(int).tolist() for n in (1, 2))
        assert after, (
            f"a worker was to die after step {RESUME_CRASH_AFTER}, but the steps reported were {before}, with no "
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
            f"one of {RESUME_WORKERS} workers died after step {RESUME_CRASH_AFTER}; Ray Train restarted them and your "
            f"function went on from step {restarted_at - 1} to {RESUME_STEPS}"
        )

    def worth_running() -> bool:
        return (
            not untouched(count_to) and isinstance(failure_config, FailureConfig) and failure_config.max_failures == 1
        )

    return _check("02b.1", run, limit_s=RUN_LIMIT_S + 60, ray_first=worth_running)


# --- 03: Ray Data --------------------------------------------------------------------------------------


CONFIDENT_CLASSES = ["dog", "fish", "bird"]  # 03.1's own model: the lesson's ViT with a new head, seeded


def _attached() -> None:
    """Ray for a check: the notebook's own (it called ``init_ray``), else attach as the lessons do, so that the check's
    tasks get the job's runtime env (on a cluster, the course's code reaches the other nodes only that way)."""
    import ray

    if not ray.is_initialized():
        from helpers.cluster import init_ray

        init_ray()


@contextlib.contextmanager
def _removed_afterwards(uri: str):
    """Delete the folder at ``uri`` when the block ends."""
    try:
        yield uri
    finally:
        remove(uri)


@contextlib.contextmanager
def _ray_data_errors_unlogged():
    """In the block, Ray Data does not log a failed task's tracebacks (two, 60 lines on stderr) before it raises: the
    check names the learner's error itself, in one line."""
    logger = logging.getLogger("ray.data")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def confident_checkpoint(folder: Path, published: str | None = None) -> Any:
    """03.1's model: a Ray Train checkpoint as ``RayTrainReportCallback`` writes one, of a model no lesson trained,
    written in ``folder`` (and copied to ``published``, a place every node reads, when given)."""
    from ray.train import Checkpoint
    from ray.train.huggingface.transformers import RayTrainReportCallback
    from transformers import set_seed

    from helpers.config import get_sources
    from helpers.models import load_classifier, load_processor

    vit = get_sources().vit
    set_seed(1)
    model = load_classifier(vit, CONFIDENT_CLASSES)
    torch.nn.init.normal_(model.classifier.weight, std=0.5)  # a head whose choice varies from image to image
    torch.nn.init.zeros_(model.classifier.bias)
    model_dir = folder / RayTrainReportCallback.CHECKPOINT_NAME
    model.save_pretrained(model_dir)
    load_processor(vit).save_pretrained(model_dir)
    if published is not None:
        return Checkpoint(publish_folder(folder, published))
    return Checkpoint.from_directory(folder)


def unseen_images() -> list[np.ndarray]:
    """Images no lesson showed: random pixels, sizes of their own, one grayscale (H, W) and one RGBA."""
    rng = np.random.default_rng(3)
    sizes = [(40, 56, 3), (64, 64, 3), (30, 90), (77, 45, 3), (52, 52, 4), (64, 80, 3), (33, 33, 3)]
    return [rng.integers(0, 256, size, dtype=np.uint8) for size in sizes]


def _expected_confidence(checkpoint: Any, images: list[np.ndarray]) -> tuple[list[str], np.ndarray]:
    """The predicted class name and its softmax probability for each image, computed here."""
    from transformers import ViTForImageClassification, ViTImageProcessorPil

    from helpers.features import pixel_values

    with checkpoint.as_directory() as folder:
        processor = ViTImageProcessorPil.from_pretrained(Path(folder) / "checkpoint")
        model = ViTForImageClassification.from_pretrained(Path(folder) / "checkpoint").eval()
    with torch.no_grad():
        probabilities = model(pixel_values=pixel_values(processor, images)).logits.softmax(-1)
    confidence, ids = probabilities.max(-1)
    return [model.config.id2label[i] for i in ids.tolist()], confidence.numpy()


_WORK = {"loads": 0, "forwards": 0}  # in an actor of 03.1's check: models loaded, forward passes run


def _count_model_work() -> None:
    """In this process, count every ``from_pretrained`` of a transformers model and every forward pass of a ViT
    classifier (03.1's check runs the learner's class with it, in an actor of its own)."""
    from transformers import PreTrainedModel, ViTForImageClassification

    if getattr(PreTrainedModel, "_counted_by_check", False):
        return
    load, forward = PreTrainedModel.from_pretrained.__func__, ViTForImageClassification.forward

    def counted_load(cls: type, *args: Any, **kwargs: Any) -> Any:
        _WORK["loads"] += 1
        return load(cls, *args, **kwargs)

    def counted_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        _WORK["forwards"] += 1
        return forward(self, *args, **kwargs)

    PreTrainedModel.from_pretrained = classmethod(counted_load)
    ViTForImageClassification.forward = counted_forward
    PreTrainedModel._counted_by_check = True


def _watched_class(classifier_class: type) -> type:
    """The learner's actor class, with what each call does counted: columns ``_loads`` and ``_forwards`` say how
    many models its ``__call__`` loaded and how many forward passes it ran for that batch."""

    class Watched(classifier_class):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            from helpers import exercises  # the module's own counters, not a copy pickled with this class

            exercises._count_model_work()
            super().__init__(*args, **kwargs)

        def __call__(self, batch: Any) -> Any:
            from helpers import exercises

            before = dict(exercises._WORK)
            out = super().__call__(batch)
            if isinstance(out, dict) and "id" in out:
                rows = len(out["id"])
                out["_loads"] = np.full(rows, exercises._WORK["loads"] - before["loads"])
                out["_forwards"] = np.full(rows, exercises._WORK["forwards"] - before["forwards"])
            return out

    Watched.__name__ = classifier_class.__name__  # Ray Data names the operator after it
    return Watched


def check_confident_classifier(classifier_class: type) -> Verdict:
    """03.1: an actor class for ``map_batches`` that adds ``predicted`` and ``confidence`` to every row."""
    import tempfile

    import ray.data

    def run() -> str:
        if not isinstance(classifier_class, type):
            raise AssertionError(
                f"`{getattr(classifier_class, '__name__', classifier_class)}` is not a class: write a class whose "
                "`__init__` loads the model once and whose `__call__` takes a batch, as `ImageClassifier` does"
            )
        if untouched(classifier_class.__init__) or untouched(classifier_class.__call__):
            raise _NotDone
        _attached()
        images = unseen_images()
        published = shared_path(f"exercise-03.1-{uuid.uuid4().hex[:8]}")  # every actor reads it there, on any node
        with tempfile.TemporaryDirectory() as folder, _removed_afterwards(published), _ray_data_errors_unlogged():
            checkpoint = confident_checkpoint(Path(folder), published)
            names, confidence = _expected_confidence(checkpoint, images)
            rows = [{"id": i, "image": image} for i, image in enumerate(images)]
            try:
                out = (
                    ray.data.from_items(rows)
                    .map_batches(
                        _watched_class(classifier_class),
                        fn_constructor_kwargs={"checkpoint": checkpoint},
                        compute=ray.data.ActorPoolStrategy(size=1),
                        batch_size=3,
                    )
                    .to_pandas()
                )
            except Exception as error:  # the learner's error, wrapped by Ray Data
                raise AssertionError(f"running it on an actor pool raised {_failure(error)}") from None
        columns = sorted(set(out.columns) - {"_loads", "_forwards"})
        assert {"predicted", "confidence"} <= set(columns), (
            f"the rows have the columns {columns}: add `predicted` and `confidence` to the batch"
        )
        assert {"id", "image"} <= set(columns), (
            f"the rows have the columns {columns}: add your columns to the batch and return it whole, "
            "the next stage needs the others"
        )
        assert len(out) == len(images), f"{len(out)} rows came out of {len(images)}: keep every row"
        counted = {"_loads", "_forwards"} <= set(out.columns)  # per batch of 3 (see _watched_class)
        loads, forwards = (int(out[column].max()) if counted else 0 for column in ("_loads", "_forwards"))
        out = out.drop(columns=["_loads", "_forwards"], errors="ignore").sort_values("id")
        predicted = [str(name) for name in out["predicted"]]
        assert predicted == names, (
            f"predicted {predicted}, expected {names}: the class *name* of the highest logit, "
            "`model.config.id2label[...]`, for each image (grayscale and RGBA ones converted to RGB)"
        )
        found = out["confidence"].to_numpy(dtype=float)
        assert ((found >= 0) & (found <= 1)).all(), (
            f"confidence {np.round(found, 3).tolist()}: a probability lies between 0 and 1; turn the logits into "
            "probabilities with a softmax first"
        )
        assert np.allclose(found, confidence, atol=1e-4), (
            f"confidence {np.round(found, 3).tolist()}, expected {np.round(confidence, 3).tolist()}: the softmax "
            "probability of the *predicted* class, for each image"
        )
        assert loads == 0, (
            "the answers are right, but your `__call__` loads the model, once for every batch: load it once, in "
            "`__init__`, where each actor of the pool keeps it for all the batches it is given"
        )
        assert forwards <= 1, (
            f"the answers are right, but the model ran {forwards} forward passes for a batch of 3 images: give it the "
            "whole batch in one call (the processor takes a list of images), not one image at a time"
        )
        return (
            f"{len(images)} images it had never seen, of several sizes and modes: every predicted class and its "
            "probability right, the model loaded once per actor, one forward pass per batch"
        )

    def worth_running() -> bool:
        return isinstance(classifier_class, type) and not (
            untouched(classifier_class.__init__) or untouched(classifier_class.__call__)
        )

    return _check("03.1", run, limit_s=300, late="Does `__call__` return for every batch?", ray_first=worth_running)


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
        ragged = np.empty(4, dtype=object)  # real photos: a batch of images of different sizes
        ragged[:] = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in [(5, 7), (9, 4), (6, 6), (3, 8)]]
        try:
            out = attempt(mirror_half, {"image": ragged.copy(), "label": np.arange(4)})
        except _Raised as error:
            raise AssertionError(
                f"on a batch of images of different sizes (real photos are) {error}: mirror each image by itself"
            ) from None
        kept = [
            np.array_equal(a, b) or np.array_equal(a, b[:, ::-1]) for a, b in zip(out["image"], ragged, strict=True)
        ]
        assert len(out["image"]) == 4 and all(kept), (
            "on a batch of images of different sizes (real photos are) some images came back changed: mirror each "
            "image by itself"
        )
        return f"{share:.0%} of 64 images mirrored left to right, the rest untouched, labels kept"

    return _check("03.2", run)


# --- 04: CIFAR-10 --------------------------------------------------------------------------------------


def check_normalize_batch(normalize_batch: Callable[[dict], dict]) -> Verdict:
    """04.1: ``normalize_batch(batch)`` for ``map_batches``: uint8 (N, H, W, C) to normalised float (N, C, H, W)."""
    from helpers.cifar import normalize

    def run() -> str:
        # images of a size the lesson never used, so that no shape can be written in by hand
        images = np.random.default_rng(0).integers(0, 256, (6, 24, 20, 3), dtype=np.uint8)
        labels = np.array([3, 1, 4, 1, 5, 9])
        out = attempt(normalize_batch, {"image": images.copy(), "label": labels.copy()})
        assert isinstance(out, Mapping) and {"image", "label"} <= set(out), (
            f"it returned {type(out).__name__}{' with ' + str(sorted(out)) if isinstance(out, Mapping) else ''}: "
            "`map_batches` wants the batch back, a dict with both columns, `image` and `label`"
        )
        result = np.asarray(out["image"])
        assert result.shape == (6, 3, 24, 20), (
            f"6 images of 24x20 pixels came back with shape {result.shape}: channels go first, (N, C, H, W), "
            "whatever the image size (`transpose`, not a reshape to 32x32)"
        )
        assert result.dtype == np.float32, (
            f"{result.dtype} images: the model's weights are float32, so its images must be too"
        )
        expected = normalize(images)
        if not np.allclose(result, expected, atol=1e-5):
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
        assert np.array_equal(np.asarray(out["label"]), labels), "the labels changed: keep them as they are"
        return "the same values as the lesson's `normalize` on images of another size, labels kept"

    return _check("04.1", run)


def hidden_model() -> torch.nn.Module:
    """The model 04.2's check trains: a linear classifier of (3, 4, 4) inputs into 2 classes, the same on every call."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 2))


def hidden_problem(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """04.2's data, not the lesson's: (rows, 3, 4, 4) float32 noise, label 1 where channel 0 is brighter than 1."""
    images = np.random.default_rng(seed).normal(size=(rows, 3, 4, 4)).astype(np.float32)
    return images, (images[:, 0].mean(axis=(1, 2)) > images[:, 1].mean(axis=(1, 2))).astype(np.int64)


def untouched(function: Callable) -> bool:
    """True while ``function``'s body is only ``raise NotImplementedError``: a costly check then starts nothing."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return False
    body = [s for s in tree.body[0].body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])


def _observed(loop_config: dict) -> None:
    """Runs on each Ray Train worker: the learner's function, watched (``_run_watched``: its reports counted, with
    the training losses of the batches since the last report), then whether the workers' models agree."""
    import ray.train

    config = dict(loop_config)
    learner, tally, reports = config.pop("learner"), config.pop("tally"), config.pop("reports")
    made: list[torch.nn.Module] = []
    losses: list[tuple[float, int]] = []  # (loss, batch size) of each training batch since the last report
    cross_entropy = torch.nn.functional.cross_entropy

    def make_model() -> torch.nn.Module:
        made.append(hidden_model())
        return made[-1]

    def counted_cross_entropy(input: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        loss = cross_entropy(input, *args, **kwargs)
        if torch.is_grad_enabled() and loss.dim() == 0:
            losses.append((float(loss.detach()), int(input.shape[0])))
        return loss

    def batch_losses() -> dict:
        if not losses:
            return {}
        values, sizes = np.array([v for v, _ in losses]), np.array([n for _, n in losses])
        found = {"batches": len(values), "last": float(values[-1]), "mean": float(values.mean())}
        found["weighted"] = float((values * sizes).sum() / sizes.sum())
        losses.clear()
        return found

    torch.nn.functional.cross_entropy = counted_cross_entropy  # nn.CrossEntropyLoss calls it too
    try:
        _run_watched(learner, config | {"make_model": make_model}, reports, measure=batch_losses)
    finally:
        torch.nn.functional.cross_entropy = cross_entropy
    spread = -1.0  # no model built with make_model
    if made:
        weights = torch.cat([p.detach().flatten().cpu() for p in made[-1].parameters()])
        everyone = [torch.zeros_like(weights) for _ in range(ray.train.get_context().get_world_size())]
        torch.distributed.all_gather(everyone, weights)
        spread = max(float((other - everyone[0]).abs().max()) for other in everyone)
    tally.add.remote(rank=ray.train.get_context().get_world_rank(), models=len(made), spread=spread)


def _failure(error: Exception) -> str:
    """What the learner's code raised (``KeyError: 'pixel_values'``), out of Ray's report of a failed run or task:
    the last ``Type: message`` line before Ray's own exceptions that wrap it (Ray Data's retry advice, for one)."""
    text = str(error).split("The above exception was the direct cause of the following exception")[0]
    for line in reversed(text.splitlines()):
        if line.strip() and not line.startswith((" ", "Traceback", "\x1b")) and ":" in line:
            return line.strip()[:200]
    return text.strip().splitlines()[0][:200] if text.strip() else type(error).__name__


def check_train_from_shard(train_from_shard: Callable[[dict], None], workers: int = 2) -> Verdict:
    """04.2: ``train_from_shard(loop_config)`` trains on Ray Train from ``get_dataset_shard("train")``, one report
    with a checkpoint per epoch; run on 2 CPU workers with a small problem of the check's own."""
    import ray
    import ray.data
    from ray.train import CheckpointConfig, LoggingConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from helpers.config import run_name, storage_path
    from helpers.distributed import torch_config
    from helpers.loops import WEIGHTS_FILE
    from helpers.measure import Tally

    def run() -> str:
        if untouched(train_from_shard):
            raise _NotDone
        _attached()
        images, labels = hidden_problem(512, seed=1)
        train = ray.data.from_items([{"image": x, "label": y} for x, y in zip(images, labels, strict=True)])
        epochs, tally = 3, Tally.remote()
        reports = ray.remote(num_cpus=0)(_Reports).remote()
        loop_config = {
            "epochs": epochs,
            "batch_size": 32,
            "lr": 0.05,
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
                result = _fit_within(trainer)
            except Exception as error:  # the learner's error, raised in a worker, or a worker the check stopped
                stopped = ray.get(reports.state.remote())["stopped"]
                if stopped:
                    raise AssertionError(_stopped_finding(stopped, WORKER_LIMIT_S)) from None
                found = _failure(error)
                if "NotImplementedError" in found:
                    raise _NotDone from None
                raise AssertionError(
                    f"a worker raised {found}. Ray Train gives the function its `loop_config` (epochs, batch_size, "
                    'lr, make_model) and the data as `ray.train.get_dataset_shard("train")`, with columns '
                    "`image` and `label`"
                ) from None
            calls = ray.get(reports.state.remote())["calls"]
        finally:
            ray.kill(reports)
        return _judge_train_run(result, ray.get(tally.table.remote()), epochs, WEIGHTS_FILE, workers, calls)

    return _check("04.2", run, limit_s=RUN_LIMIT_S + 60, ray_first=lambda: not untouched(train_from_shard))


def _judge_train_run(
    result: Any,
    workers_seen: pd.DataFrame,
    epochs: int,
    weights_file: str,
    workers: int,
    calls: dict[str, list[dict]] | None = None,
) -> str:
    """04.2's findings on a finished run: the reports (``calls``: each worker's ``ray.train.report`` calls, as
    ``_Reports`` kept them), the checkpoint, the workers' agreement, the model's skill."""
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
    reports = len(result.metrics_dataframe)
    assert reports == epochs, (
        f"{reports} report(s) with a checkpoint for {epochs} epochs: report once per epoch, and train for "
        '`loop_config["epochs"]` epochs (the check asks for a number you have not seen)'
    )
    losses = result.metrics_dataframe.get("loss")
    assert losses is not None and losses.notna().all(), (
        f"your reports hold {sorted(result.metrics)}: report the epoch's mean training loss as `loss`"
    )
    assert losses.nunique() > 1, (
        f"the same loss, {losses.iloc[0]}, in every report: report the loss that this epoch's training computed"
    )
    calls = calls or {}
    attaching = sorted(
        int(worker.split("/")[1]) for worker, made in calls.items() if any(c["checkpoint"] for c in made)
    )
    assert not [rank for rank in attaching if rank != 0], (
        f"workers {attaching} each attached a checkpoint: the workers hold the same model (prepare_model keeps them "
        "equal), so only rank 0 attaches one, `checkpoint=None` on the others (every worker still calls "
        "`ray.train.report`); otherwise every worker uploads a copy of the same weights"
    )
    measured = [c for c in calls.get("1/0", []) if "loss" in c and c.get("batches", 0) > 1]
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
    with result.checkpoint.as_directory() as folder:
        path = os.path.join(folder, weights_file)
        assert os.path.exists(path), (
            f"the checkpoint holds {sorted(os.listdir(folder))}, no `{weights_file}`: save the state dict with "
            f"`torch.save(..., os.path.join(folder, WEIGHTS_FILE))` before `Checkpoint.from_directory(folder)`"
        )
        weights = torch.load(path)
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


# --- 05: the data-loading playbook ---------------------------------------------------------------------


@contextlib.contextmanager
def _calls_recorded(methods: list[tuple[type, str]], calls: list[tuple[str, dict]]):
    """In the block, every call of the ``(class, method name)`` pairs is appended to ``calls`` as ``(name,
    keyword arguments)``; the methods are restored afterwards. How a check sees which Ray Data steps an answer
    asked for, whatever it returns."""
    originals = [(cls, name, cls.__dict__[name]) for cls, name in methods if name in cls.__dict__]

    def recording(name: str, method: Callable) -> Callable:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, dict(kwargs)))
            return method(*args, **kwargs)

        return recorded

    for cls, name, method in originals:
        setattr(cls, name, recording(name, method))
    try:
        yield calls
    finally:
        for cls, name, method in originals:
            setattr(cls, name, method)


def _ids(found: Any) -> np.ndarray:
    """An answer that should be one array of ids, as one: an AssertionError that says what it is otherwise."""
    if isinstance(found, list | tuple) and found and all(isinstance(part, np.ndarray | list | dict) for part in found):
        raise AssertionError(
            f"it returned a {type(found).__name__} of {len(found)} parts (batches?): return one numpy array of all "
            "the ids, in order (`np.concatenate` the batches' `id` columns)"
        )
    try:
        ids = np.asarray(found)
    except (ValueError, TypeError) as error:
        raise AssertionError(
            f"it returned {type(found).__name__}, which is not an array of ids ({_first_line(error)}): return one "
            "numpy array of the ids"
        ) from None
    assert ids.ndim == 1 and ids.dtype.kind in "iu", (
        f"it returned an array of shape {ids.shape} and type {ids.dtype}: return one flat array of the integer ids"
    )
    return ids


def check_epoch_order(epoch_order: Callable[[Any, int], np.ndarray]) -> Verdict:
    """05.1: ``epoch_order(ds, epoch)``: a shuffled order of the ids, the same on every run, new every epoch, shuffled
    by Ray Data itself (a seeded ``random_shuffle``, or a seeded local shuffle as the batches are read)."""
    import ray.data
    from ray.data import DataIterator, Dataset

    watched = [(Dataset, "random_shuffle"), (Dataset, "randomize_block_order")]
    watched += [(cls, name) for cls in (Dataset, DataIterator) for name in ("iter_batches", "iter_torch_batches")]

    def shuffled_by_ray(calls: list[tuple[str, dict]]) -> bool:
        return any(
            name in ("random_shuffle", "randomize_block_order") or kwargs.get("local_shuffle_buffer_size")
            for name, kwargs in calls
        )

    def run() -> str:
        _attached()
        ds = ray.data.range(2000, override_num_blocks=10)
        calls: list[tuple[str, dict]] = []
        with _calls_recorded(watched, calls):
            first, again, other = (_ids(attempt(epoch_order, ds, epoch)) for epoch in (0, 0, 1))
        assert sorted(first.tolist()) == list(range(2000)), (
            f"{len(first)} ids, {len(set(first.tolist()))} distinct: every id once, in some order"
        )
        assert not np.array_equal(first, np.arange(2000)), "the ids come back in order: nothing was shuffled"
        assert np.array_equal(first, again), (
            "two runs of epoch 0 gave different orders: every random step needs a seed (`random_shuffle(seed=)`, "
            "`local_shuffle_seed`), and the blocks must come out in order (`preserve_order`, section 6)"
        )
        assert not np.array_equal(first, other), "epochs 0 and 1 give the same order: let the seed depend on the epoch"
        assert shuffled_by_ray(calls), (
            "the order is shuffled, but not by Ray Data: a permutation made on the driver (numpy) needs every id "
            "there first, which a real dataset does not fit. Shuffle with Ray Data, seeded by the epoch: "
            "`ds.random_shuffle(seed=...)`, or a local shuffle as the batches are read (`local_shuffle_buffer_size`, "
            "`local_shuffle_seed`)"
        )
        return "the same shuffled order for the same epoch, another one for the next epoch, shuffled by Ray Data"

    return _check("05.1", run, limit_s=240, ray_first=lambda: not untouched(epoch_order))


def _ids_per_worker(iterators: list, timeout_s: float = 120) -> list[np.ndarray]:
    """The ``id``s each worker's iterator yields, read at once in threads as Ray Train's workers read theirs."""
    from concurrent.futures import ThreadPoolExecutor

    def read(iterator: Any) -> np.ndarray:
        batches = [np.asarray(batch["id"]) for batch in iterator.iter_batches(batch_size=None)]
        return np.concatenate([*batches, np.empty(0, int)])

    pool = ThreadPoolExecutor(len(iterators))
    try:
        futures = [pool.submit(read, iterator) for iterator in iterators]
        return [future.result(timeout=timeout_s) for future in futures]
    except TimeoutError:
        raise AssertionError(
            f"reading the workers' iterators did not end within {timeout_s:.0f} s: does every worker have an "
            "iterator of its own (one per split of `streaming_split`, or `ds.iterator()`)?"
        ) from None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


MATERIALIZING = ("split", "split_at_indices", "split_proportionately", "materialize")  # 05.2: not for a split


def check_quick_validation(config_class: type) -> Verdict:
    """05.2: ``config_class(valid_rows=n)`` is a DataConfig whose ``configure`` splits every dataset equally between
    the workers, except ``valid``: every worker gets the same ``n`` rows of it, whole."""
    import ray
    import ray.data
    from ray.data import DataIterator, Dataset
    from ray.train import DataConfig

    def configured(config: Any, name: str, ds: Any, world_size: int) -> list:
        """What Ray Train does with ``config``: ``configure`` once per dataset, with a one-entry dict."""
        node = ray.get_runtime_context().get_node_id()
        calls: list[tuple[str, dict]] = []
        try:
            with _calls_recorded([(Dataset, method) for method in MATERIALIZING], calls):
                per_worker = attempt(config.configure, {name: ds}, world_size, None, [node] * world_size)
        except _Raised as raised:
            hint = ""
            if "KeyError" in str(raised):
                hint = (
                    ": Ray Train calls `configure` once per dataset, with a one-entry `datasets` dict; loop over "
                    "`datasets.items()` instead of looking names up"
                )
            raise AssertionError(f"`configure` for the `{name}` dataset {raised}{hint}") from None
        assert isinstance(per_worker, list | tuple) and len(per_worker) == world_size, (
            f"`configure` returned {type(per_worker).__name__} "
            f"{'of ' + str(len(per_worker)) if hasattr(per_worker, '__len__') else ''} for world_size={world_size}: "
            "return a list with one dict per worker, `world_size` of them"
        )
        assert name == "valid" or not calls, (
            f"`configure` for the `{name}` dataset called `{calls[0][0] if calls else ''}`: that runs the whole "
            "dataset and holds every row in Ray's object store before the first step; `ds.streaming_split(world_size, "
            "equal=True)` hands each worker its share as the rows are produced"
        )
        iterators = [worker.get(name) if isinstance(worker, dict) else None for worker in per_worker]
        for rank, iterator in enumerate(iterators):
            assert isinstance(iterator, DataIterator), (
                f"worker {rank}'s `{name}` is {type(iterator).__name__}: each worker's dict maps the dataset's name "
                "to an iterator, `ds.iterator()` (the whole dataset) or one of `ds.streaming_split(...)` (a share)"
            )
        return _ids_per_worker(iterators)

    def run() -> str:
        workers = 3  # not the lesson's 2
        config = attempt(config_class, valid_rows=25)
        assert isinstance(config, DataConfig), (
            f"it made a {type(config).__name__}: `TorchTrainer(dataset_config=...)` takes a DataConfig, so subclass it"
        )
        _attached()
        valid = ray.data.range(60).map_batches(lambda b: {"id": b["id"] + 1000})
        for name, size in (("train", 300), ("test", 90)):  # `test`: a dataset the exercise never named
            rows = configured(config, name, ray.data.range(size), workers)
            counts = [len(r) for r in rows]
            assert not all(count == size for count in counts), (
                f"every worker got all {size} `{name}` rows: every dataset but `valid` is split between the workers "
                "(`ds.streaming_split(world_size, equal=True, ...)`, one shard per worker)"
            )
            assert sorted(np.concatenate(rows).tolist()) == list(range(size)), (
                f"the {workers} workers' `{name}` shards hold {sum(counts)} rows for {size} in the dataset: every row "
                "goes to exactly one worker"
            )
            assert len(set(counts)) == 1, (
                f"the workers got {counts} `{name}` rows: ask for equal shares (`equal=True`), or the workers take "
                "different numbers of steps and wait for each other"
            )
        rows = configured(config, "valid", valid, workers)
        counts = [len(r) for r in rows]
        assert not all(count == 60 for count in counts), (
            "every worker got all 60 `valid` rows: keep `valid_rows` of them (the config was made with `valid_rows=25`)"
        )
        sets = [sorted(r.tolist()) for r in rows]
        assert all(s == sets[0] for s in sets), (
            f"the workers got different `valid` rows ({counts} rows): every worker evaluates on the same rows, "
            "whole (`.iterator()` of one limited dataset), not on a share"
        )
        assert counts[0] == 25 and len(set(sets[0])) == 25 and set(sets[0]) <= set(range(1000, 1060)), (
            f"each worker got {counts[0]} `valid` rows, the config was made with `valid_rows=25`: use the value "
            "kept in `__init__`, not a number of your own"
        )
        return (
            f"on {workers} workers: `train` and an unseen `test` split equally, every worker the same 25 `valid` "
            "rows, whole"
        )

    return _check(
        "05.2",
        run,
        limit_s=300,
        ray_first=lambda: isinstance(config_class, type) and not untouched(config_class.configure),
    )


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

    from helpers.serving import serve_logging

    def run() -> str:
        if not isinstance(deployment, Deployment):
            raise AssertionError(
                f"it is a {type(deployment).__name__}, not a Serve deployment: decorate the class with "
                "`@serve.deployment` (and its method with `@serve.batch`)"
            )
        with ThreadPoolExecutor(max_workers=1) as pool:  # untouched? find out here, without starting a replica
            pool.submit(_call_once, deployment).result()
        taken = deployment.max_ongoing_requests
        assert taken >= max_batch_size, (
            f"a replica takes only `max_ongoing_requests={taken}` requests at a time: a batch of up to "
            f"{max_batch_size} never fills. Let it take at least {max_batch_size} in `@serve.deployment(...)`"
        )
        assert _serve_is_running(), "Serve is not running here: run the lesson's cell with `serve.start(...)` first"
        values = np.random.default_rng().integers(0, 1000, 48).tolist()  # 48 requests at once, one value each

        quiet = serve_logging()

        def deploy_and_call() -> list:  # in a thread of its own: a notebook's event loop forbids waiting in it
            handle = attempt(  # Serve's logging as the lesson's: no line per request
                serve.run, deployment.bind(score_batch), name=EXERCISE_APP, route_prefix=None, logging_config=quiet
            )
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
        return f"48 requests arriving one at a time were answered in batches of up to {max(sizes)}, each answer its own"

    return _check("06.1", run, limit_s=300)


MODEL_MAX_ONGOING = 32  # 06.2: the lesson's Model takes two batches of 16 at a time (unless the options say other)


def check_autoscaling(scaling_options: Callable[[dict[str, float]], dict]) -> Verdict:
    """06.2: ``scaling_options(resources)`` gives a model deployment's ``.options(...)``: it scales with the load,
    keeps a replica ready, and asks for one GPU per replica only on a cluster with GPUs, no more replicas than GPUs."""
    from ray import serve

    @serve.deployment(max_ongoing_requests=MODEL_MAX_ONGOING)
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
        taken = configured._deployment_config.max_ongoing_requests
        assert scaling.target_ongoing_requests < taken, (
            f"target_ongoing_requests={scaling.target_ongoing_requests:g}, but a replica takes at most "
            f"max_ongoing_requests={taken} at a time (the lesson's `Model`): its load never goes above the target, "
            "so Serve never adds a replica. Keep the target below what a replica takes"
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
