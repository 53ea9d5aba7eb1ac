"""Checks for lesson 07's "Your turn" (Ray Tune): on the rules of :mod:`helpers.exercises.checking`.

Each check runs the learner's code on inputs of its own, prints one verdict (✓, ✗ with a hint, or "not done yet"),
never raises, and never waits long: the learner's code runs with a time limit, and the check's own Tune experiment
has a time budget.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import numpy as np

from helpers.exercises.checking import Verdict, _attached, _check, _NotDone, attempt, untouched

CALL_LIMIT_S = 30  # the learner's function, called once: far more than a right answer needs
EXPERIMENT_LIMIT_S = 90  # the check's own Tune experiment (07.2): a few seconds on an idle laptop


def _within(seconds: float, function: Callable, *args: Any) -> Any:
    """``attempt(function, *args)`` in a thread, given ``seconds``: an answer that loops is a finding, not a hang."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(attempt, function, *args).result(timeout=seconds)
    except FutureTimeout:
        raise AssertionError(f"your function did not return within {seconds:.0f} s: does it wait or loop?") from None
    finally:
        pool.shutdown(wait=False)


# --- 07.1: a search space and a scheduler for a budget --------------------------------------------------------------

LR_RANGE = (1e-5, 1e-1)
BATCH_SIZES = {16, 32, 64}
SAMPLES = 400  # draws from the learner's space
MADE_UP_TRIALS = 12  # trials the check feeds to the learner's scheduler


class _Trial:
    """What an ASHA scheduler reads from a trial: its id."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id

    def __repr__(self) -> str:
        return self.trial_id


def made_up_curve(quality: float, epochs: int) -> list[float]:
    """A trial's validation accuracy per epoch: better trials start higher and keep climbing."""
    return [round(0.1 + quality * (1 - 0.5**epoch), 4) for epoch in range(1, epochs + 1)]


def _samples(param_space: Any) -> list[dict]:
    """``SAMPLES`` configurations drawn from ``param_space`` the way Tune's random search draws them."""
    from ray.tune.search.variant_generator import generate_variants

    assert isinstance(param_space, dict), (
        f"the search space is a {type(param_space).__name__}: make it a dict, one entry per hyperparameter"
    )
    missing = {"lr", "batch_size"} - set(param_space)
    assert not missing, f"the search space has no {sorted(missing)}: name the entries `lr` and `batch_size`"
    rng = np.random.RandomState(0)
    try:
        return [
            config for _ in range(SAMPLES) for _, config in generate_variants(param_space, random_state=rng)
        ]  # one variant per draw unless the space holds a grid_search
    except Exception as error:
        raise AssertionError(
            f"Tune cannot sample this space ({type(error).__name__}: {str(error).splitlines()[0][:160]}): "
            "each entry is a constant or a search domain such as `tune.loguniform(low, high)` or `tune.choice([...])`"
        ) from None


def _judge_space(param_space: dict) -> str:
    configs = _samples(param_space)
    rates = np.array([c["lr"] for c in configs], dtype=float) if configs else np.array([])
    sizes = [c["batch_size"] for c in configs]
    assert all(isinstance(s, int | np.integer) for s in sizes), (
        f"`batch_size` came out as {sizes[0]!r} in every trial: a plain list is passed to every trial as it is; "
        "`tune.choice([...])` picks one of its values per trial"
    )
    assert set(sizes) == BATCH_SIZES, (
        f"`batch_size` took the values {sorted(set(sizes))[:8]} in {SAMPLES} draws: the exercise asks for one of "
        f"{sorted(BATCH_SIZES)} per trial (`tune.choice`)"
    )
    low, high = LR_RANGE
    assert rates.size and np.all((rates >= low * 0.999) & (rates <= high * 1.001)), (
        f"`lr` went from {rates.min():.2g} to {rates.max():.2g}: keep it between {low:g} and {high:g}"
    )
    assert len(set(rates.round(12))) > SAMPLES // 2, (
        f"`lr` took only {len(set(rates.round(12)))} values in {SAMPLES} draws: sample it from a range"
    )
    below = float(np.mean(rates < math.sqrt(low * high)))  # the middle of the range on a log scale: 1e-3
    assert below > 0.35, (
        f"only {below:.0%} of the learning rates drawn are below {math.sqrt(low * high):g}, the middle of the range "
        "on a log scale: a uniform draw spends almost every trial on the top decade. Learning rates matter by "
        "factors: draw them log-uniformly (`tune.loguniform`)"
    )
    return f"`lr` log-uniform ({below:.0%} of {SAMPLES} draws below 1e-3), `batch_size` one of {sorted(BATCH_SIZES)}"


def _run_scheduler(scheduler: Any, epochs: int) -> tuple[dict[str, int], dict[str, float]]:
    """Feed ``MADE_UP_TRIALS`` made-up curves to ``scheduler`` an epoch at a time, as trials running side by side
    report; return the epochs each trial trained before the scheduler stopped it, and each trial's quality."""
    from ray.tune.schedulers import TrialScheduler

    np.random.seed(0)  # ASHA picks a bracket at random when it has several
    order = [5, 11, 2, 8, 0, 9, 3, 7, 1, 10, 4, 6]  # the trials report in this order of quality: the best second
    qualities = {f"trial_{i:02d}": float(q) for i, q in enumerate(np.linspace(0.2, 0.8, MADE_UP_TRIALS)[order])}
    trials = {name: _Trial(name) for name in qualities}
    for trial in trials.values():
        scheduler.on_trial_add(None, trial)
    trained = dict.fromkeys(trials, 0)
    running = list(trials)
    for epoch in range(1, 3 * epochs + 1):  # longer than the budget: a scheduler that never stops them is seen
        for name in list(running):
            accuracy = made_up_curve(qualities[name], epoch)[-1]
            result = {"training_iteration": epoch, "epoch": epoch, "accuracy": accuracy, "val_loss": 2.5 - 2 * accuracy}
            decision = scheduler.on_trial_result(None, trials[name], result)
            trained[name] = epoch
            if decision == TrialScheduler.STOP:
                running.remove(name)
                scheduler.on_trial_complete(None, trials[name], result)
        if not running:
            break
    return trained, qualities


def _judge_scheduler(scheduler: Any, epochs: int) -> str:
    from ray.tune.schedulers import AsyncHyperBandScheduler

    assert isinstance(scheduler, AsyncHyperBandScheduler), (
        f"the scheduler is a {type(scheduler).__name__}: use `ASHAScheduler` (from ray.tune.schedulers), which "
        "stops weak trials early"
    )
    metric, mode = scheduler._metric, scheduler._mode  # set when the learner passed them to the scheduler itself
    assert mode in (None, "max"), (
        f'your scheduler has mode="{mode}": it would keep the trials with the *lowest* accuracy and stop the best. '
        'Accuracy is maximised: mode="max" (or leave metric and mode to `TuneConfig`)'
    )
    assert metric in (None, "accuracy"), (
        f'your scheduler ranks trials by "{metric}", which the trials do not report: the check\'s trials report '
        '"accuracy" (or leave metric and mode to `TuneConfig`)'
    )
    scheduler.set_search_properties("accuracy", "max")  # what TuneConfig(metric=..., mode=...) passes on
    trained, qualities = _run_scheduler(scheduler, epochs)
    longest = max(trained.values())
    assert longest <= epochs, (
        f"a trial trained {longest} epochs, but the budget is {epochs} per trial: each `tune.report` is one "
        f"`training_iteration`, and ASHA's `max_t` is the most a trial may train"
    )
    assert longest == epochs, (
        f"no trial trained more than {longest} epochs of the {epochs} the budget allows: `max_t` is the most a "
        "trial may train; the best trials should reach it"
    )
    best = max(qualities, key=qualities.get)
    assert trained[best] == epochs, (
        f"the best trial was stopped after {trained[best]} epochs: is the scheduler ranking by accuracy, highest first?"
    )
    after_one = sum(1 for n in trained.values() if n == 1)
    early = sum(1 for n in trained.values() if n < epochs)
    assert after_one, (
        f"no trial was stopped after its first epoch ({early} of {MADE_UP_TRIALS} stopped early in all): the "
        "exercise stops weak trials after 1 epoch; that is ASHA's `grace_period`"
    )
    assert early >= MADE_UP_TRIALS // 3, (
        f"only {early} of {MADE_UP_TRIALS} trials stopped early: with a `reduction_factor` of 2, about half the "
        "trials that reach each rung stop there"
    )
    total = sum(trained.values())
    return (
        f"on {MADE_UP_TRIALS} made-up trials your scheduler stopped {early} early ({after_one} after epoch 1) and "
        f"let the best reach {epochs} epochs: {total} epochs trained of {MADE_UP_TRIALS * epochs}"
    )


def check_search(make_search: Callable[[int], tuple[dict, Any]]) -> Verdict:
    """07.1: ``make_search(max_epochs)`` returns a search space (``lr`` log-uniform in 1e-5..1e-1, ``batch_size`` one
    of 16/32/64) and an ASHA scheduler that stops weak trials after 1 epoch and none past ``max_epochs``."""

    def run() -> str:
        findings = []
        for epochs in (4, 6):  # two budgets: an answer that ignores `max_epochs` is seen
            found = _within(CALL_LIMIT_S, make_search, epochs)
            assert isinstance(found, tuple) and len(found) == 2, (
                f"`make_search({epochs})` returned {type(found).__name__}: return a pair, (param_space, scheduler)"
            )
            param_space, scheduler = found
            space = _judge_space(param_space)
            findings.append(_judge_scheduler(scheduler, epochs))
        return f"{space}; with max_epochs=6, {findings[-1]}"

    return _check("07.1", run)


# --- 07.2: the best trial of a ResultGrid ---------------------------------------------------------------------------

# Made-up trials: (accuracy, val_loss) per epoch. "peaks" reaches the highest accuracy, at epoch 2, then falls off;
# "steady" has the best last epoch; "lowest_loss" the lowest loss but not the best accuracy; "weak" the worst.
CURVES = {
    "peaks": [(0.62, 1.30), (0.91, 0.60), (0.80, 0.75)],
    "steady": [(0.60, 1.00), (0.75, 0.62), (0.88, 0.50)],
    "lowest_loss": [(0.58, 0.90), (0.70, 0.45), (0.76, 0.30)],
    "weak": [(0.30, 2.10), (0.35, 2.00), (0.38, 1.95)],
}
BEST = "peaks"


def made_up_trial(config: dict) -> None:
    """A Tune trial that reports its made-up curve, one epoch per report (07.2's experiment)."""
    from ray import tune

    for epoch, (accuracy, loss) in enumerate(CURVES[config["curve"]], start=1):
        tune.report({"accuracy": accuracy, "val_loss": loss, "epoch": epoch})


def made_up_results() -> Any:
    """07.2's ResultGrid: a small Tune experiment of :func:`made_up_trial`, one trial per curve, on the cluster."""
    from ray import tune

    from helpers.course.config import run_name, storage_path

    tuner = tune.Tuner(
        tune.with_resources(made_up_trial, {"cpu": 1}),
        param_space={"curve": tune.grid_search(list(CURVES)), "lr": tune.loguniform(1e-4, 1e-2)},
        tune_config=tune.TuneConfig(time_budget_s=EXPERIMENT_LIMIT_S),
        run_config=tune.RunConfig(name=run_name("exercise-07.2"), storage_path=storage_path(), verbose=0),
    )
    return tuner.fit()


def _judge_best(found: Any, results: Any) -> str:
    assert isinstance(found, tuple) and len(found) == 2, (
        f"it returned {type(found).__name__}: return a pair, (the best trial's config, its best accuracy)"
    )
    chosen, accuracy = found
    assert isinstance(chosen, dict) and "curve" in chosen, (
        f"the first value is {type(chosen).__name__}: return the trial's `config` (a dict: `result.config`)"
    )
    peaks = {name: max(a for a, _ in curve) for name, curve in CURVES.items()}
    picked = chosen["curve"]
    assert picked != "weak", (
        'you picked the trial with the lowest accuracy: with mode="min" Tune looks for the smallest value; '
        'accuracy is best when highest (mode="max")'
    )
    assert picked != "lowest_loss", (
        "you picked the trial with the lowest validation loss; the exercise ranks by validation accuracy "
        '(metric="accuracy"). The two often agree, not always'
    )
    assert picked != "steady", (
        f"you picked the trial with the best *last* epoch ({CURVES['steady'][-1][0]}); another trial reached "
        f'{peaks[BEST]} at an earlier epoch. `get_best_result` compares last epochs unless you pass scope="all"'
    )
    assert picked == BEST, f"you picked the trial {chosen}: look for the highest accuracy at any epoch"
    try:
        accuracy = float(accuracy)
    except (TypeError, ValueError):
        raise AssertionError(f"the second value is {accuracy!r}: return the accuracy as a number") from None
    assert not math.isclose(accuracy, CURVES[BEST][-1][0]), (
        f"the right trial, but {accuracy} is its last epoch's accuracy (`result.metrics` holds the last report); "
        f"its best epoch reached more: every epoch is in `result.metrics_dataframe`"
    )
    assert math.isclose(accuracy, peaks[BEST]), (
        f"the right trial, but its best accuracy is not {accuracy}: take the highest value of the `accuracy` column "
        "of its `metrics_dataframe`"
    )
    return (
        f"of {len(results)} trials you picked the one that reached {peaks[BEST]} at epoch 2, not the best last epoch "
        f"({CURVES['steady'][-1][0]}) nor the lowest loss"
    )


def check_best_trial(best_trial: Callable[[Any], tuple[dict, float]]) -> Verdict:
    """07.2: ``best_trial(results)`` returns the config and the accuracy of the trial whose validation accuracy was
    highest at any epoch; run on a ResultGrid of made-up trials that the check produces on the cluster."""

    def run() -> str:
        if untouched(best_trial):
            raise _NotDone
        _attached()
        try:
            results = made_up_results()
        except Exception as error:
            raise AssertionError(
                f"the check's own experiment failed ({type(error).__name__}: {str(error).splitlines()[0][:160]}); "
                "run the cell again"
            ) from None
        reports = [0 if r.metrics_dataframe is None else len(r.metrics_dataframe) for r in results]
        if len(results) < len(CURVES) or results.num_errors or min(reports) < len(CURVES[BEST]):
            raise AssertionError(
                f"the check's own experiment did not finish within {EXPERIMENT_LIMIT_S} s (a busy cluster?): "
                "run the cell again"
            )
        return _judge_best(_within(CALL_LIMIT_S, best_trial, results), results)

    if "limit_s" in inspect.signature(_check).parameters:  # a whole-check time limit, where _check takes one
        return _check("07.2", run, limit_s=EXPERIMENT_LIMIT_S + CALL_LIMIT_S + 30)
    return _check("07.2", run)
