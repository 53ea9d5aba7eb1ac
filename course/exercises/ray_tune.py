"""Checks for lesson 07's "Your turn" (Ray Tune): on the rules of :mod:`course.exercises.checking`.

Each check runs the learner's code on inputs of its own, prints one verdict (✓, ✗ with a hint, or "not done yet"),
never raises, and never waits long: the learner's code runs with a time limit, and the check's own Tune experiment
has a time budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from course.deadline import first_line
from course.exercises.checking import NotDone, Raised, Verdict, attach_ray, attempt, check, in_time, untouched
from course.exercises.search_space import is_plain_number, judge_space

CALL_LIMIT_S = 30  # the learner's function, called once: far more than a right answer needs
EXPERIMENT_LIMIT_S = 90  # the check's own Tune experiment (07.2): a few seconds on an idle laptop


# What Tune's own checks say when the learner's code does something they refuse, and what it means in the exercise.
RAISED_HINTS = {
    "Reduction Factor not valid": (
        "ASHA's `reduction_factor` is above 1: of the trials that reach a rung, 1 in `reduction_factor` goes on. "
        "Half going on is `reduction_factor=2`"
    ),
    "grace_period must be positive": (
        "`grace_period` is the number of reports before a trial can first be stopped: 1 stops weak trials after "
        "their first epoch"
    ),
    "grace_period must be <= max_t": (
        "`grace_period` (the first rung) comes within `max_t` (the most a trial trains): the budget is `max_epochs`"
    ),
    "No metric is provided": (
        "The `ResultGrid` you are given comes from a `Tuner` whose `TuneConfig` names no metric: say it in the "
        'call, `get_best_result(metric="accuracy", mode=..., scope=...)`'
    ),
    "No mode is provided": (
        "The `ResultGrid` you are given comes from a `Tuner` whose `TuneConfig` names no mode: say in the call which "
        'end of the metric is best, `mode="max"` or `mode="min"`'
    ),
    "LogUniform requires a lower bound greater than 0": (
        "`tune.loguniform` takes the bounds themselves, both above 0 (1e-5, not -5 or 0), and draws their "
        "logarithm uniformly for you"
    ),
}


def _within_hinted(function: Callable, *args: Any) -> Any:
    """``attempt(function, *args)`` given ``CALL_LIMIT_S``: an answer that loops is a finding, not a hang, and is
    stopped. Where the learner's code raised one of the errors in ``RAISED_HINTS``, the verdict adds what it means for
    the exercise."""
    late = f"your function did not return within {CALL_LIMIT_S:.0f} s: does it wait or loop?"
    try:
        return in_time(attempt, function, *args, limit_s=CALL_LIMIT_S, late=late, grace_s=1)
    except Raised as raised:
        hint = next((h for words, h in RAISED_HINTS.items() if words in str(raised)), None)
        said = str(raised) if str(raised).endswith((".", "!", "?")) else f"{raised}."
        raise Raised(f"{said} {hint}" if hint else str(raised)) from None


# --- 07.1: a search space and a scheduler for a budget --------------------------------------------------------------
# (the search space is judged in course.exercises.search_space; the scheduler here)

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

    assert not (isinstance(scheduler, type) and issubclass(scheduler, AsyncHyperBandScheduler)), (
        "the scheduler is the class `ASHAScheduler` itself: make one, `ASHAScheduler(...)` with your options. A "
        "scheduler keeps the records of the trials it judges, one scheduler per experiment"
    )
    assert isinstance(scheduler, AsyncHyperBandScheduler), (
        f"the scheduler is a {type(scheduler).__name__}: use `ASHAScheduler` (from ray.tune.schedulers), which "
        "stops weak trials early"
    )
    metric, mode = scheduler._metric, scheduler._mode  # set when the learner passed them to the scheduler itself
    refused = (
        "With `TuneConfig(metric=..., mode=...)` as the lesson writes it, Tune refuses a scheduler that has its own "
        "(ValueError: ... the scheduler you are using was already instantiated with their own `metric` and `mode`): "
        "leave both to `TuneConfig`"
    )
    assert metric in (None, "accuracy"), (
        f'your scheduler ranks the trials by "{metric}": the trials report it (lower is better: mode="min"), but the '
        f"exercise ranks them the lesson's way, by accuracy, set once in `TuneConfig`. {refused}"
    )
    assert mode in (None, "max"), (
        f'your scheduler has mode="{mode}": it would keep the trials with the *lowest* accuracy and '
        f"stop the best. {refused}"
    )
    assert metric is None and mode is None, (
        f"your scheduler sets {'metric' if metric else 'mode'}={(metric or mode)!r} itself"
        + ("" if metric and mode else f" and leaves the {'mode' if metric else 'metric'} unset")
        + f". {refused}"
    )
    assert scheduler._time_attr in ("training_iteration", "epoch"), (
        f'your scheduler counts time in "{scheduler._time_attr}"; the budget is in epochs, one `tune.report` '
        "each: leave `time_attr` at its default, training_iteration"
    )
    factor = scheduler._reduction_factor
    default = " (4 is ASHA's default)" if factor == 4 else ""
    assert math.isclose(factor, 2), (
        f"reduction_factor={factor:g} lets about {1 / factor:.0%} of the trials that reach a rung go on{default}; "
        "the exercise asks for about half: `reduction_factor=2`"
    )
    assert len(scheduler._brackets) == 1, (
        f"your scheduler has {len(scheduler._brackets)} brackets: ASHA puts each trial in one of them at random, and "
        "the first rung of bracket 2 comes after `grace_period * reduction_factor` reports, so a weak trial there is "
        "not stopped after its first epoch. Leave `brackets` at its default, 1"
    )
    assert scheduler._stop_last_trials, (
        "your scheduler has `stop_last_trials=False`: the trials that pass the last rung then train on past `max_t`, "
        f"beyond the budget of {epochs} epochs. Leave it at its default, True"
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
            found = _within_hinted(make_search, epochs)
            assert isinstance(found, tuple | list) and len(found) == 2, (
                f"`make_search({epochs})` returned {type(found).__name__}: return a pair, (param_space, scheduler)"
            )
            param_space, scheduler = found
            space = judge_space(param_space)
            findings.append(_judge_scheduler(scheduler, epochs))
        return f"{space}; with max_epochs=6, {findings[-1]}"

    return check("07.1", run)


# --- 07.2: the best trial of a ResultGrid ---------------------------------------------------------------------------

# Made-up trials: (accuracy, val_loss) per epoch, in the order of the experiment's grid (the best neither first nor
# last). "middling" comes first and is best by no measure (returning it is returning the grid's first trial); "peaks"
# reaches the highest accuracy, at epoch 2, then falls off; "steady" has the best last epoch and the best average;
# "lowest_loss" the lowest loss at every epoch, in every scope, but not the best accuracy; "weak" the worst.
CURVES = {
    "middling": [(0.66, 1.00), (0.72, 0.90), (0.74, 0.85)],
    "steady": [(0.82, 0.70), (0.85, 0.55), (0.88, 0.50)],
    "weak": [(0.30, 2.10), (0.35, 2.00), (0.38, 1.95)],
    "peaks": [(0.62, 1.30), (0.91, 0.60), (0.80, 0.75)],
    "lowest_loss": [(0.58, 0.40), (0.70, 0.35), (0.76, 0.30)],
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

    from course.storage import run_name, storage_path

    tuner = tune.Tuner(
        tune.with_resources(made_up_trial, {"cpu": 1}),
        param_space={"curve": tune.grid_search(list(CURVES)), "lr": tune.loguniform(1e-4, 1e-2)},
        tune_config=tune.TuneConfig(time_budget_s=EXPERIMENT_LIMIT_S),
        run_config=tune.RunConfig(
            name=run_name("exercise-07.2"),
            storage_path=storage_path(),
            verbose=0,
            progress_reporter=tune.CLIReporter(),  # in the learner's notebook: clears none of the cell's output
        ),
    )
    return tuner.fit()


def _config_problem(chosen: Any, accuracy: Any) -> str | None:
    """What is wrong with the first value ``best_trial`` returned, which should be a trial's ``config``."""
    if isinstance(chosen, dict) and "curve" in chosen:
        return None
    if is_plain_number(chosen) and (isinstance(accuracy, dict) or hasattr(accuracy, "metrics")):
        return "the pair came back as (accuracy, config): return `(config, accuracy)`, in that order"
    if hasattr(chosen, "config") and hasattr(chosen, "metrics"):
        return "the first value is a `Result`, the whole trial: return its `config` (`result.config`, a dict)"
    keys = [str(key) for key in (chosen.keys() if hasattr(chosen, "keys") else [])]
    if any(key.startswith("config/") for key in keys):
        return (
            "the first value has keys like 'config/curve': those are the column names of `get_dataframe()`'s table, "
            "not a config. A trial's config is keyed by the hyperparameters' own names ('curve', 'lr'): take "
            "`result.config`, or drop the 'config/' from each key"
        )
    if "accuracy" in keys or "training_iteration" in keys:
        return (
            "the first value is a report of the trial (accuracy, val_loss, training_iteration, ...: "
            "`result.metrics`, its last report), not its config: return `result.config`, the dict of its "
            "hyperparameters"
        )
    return (
        f"the first value is a {type(chosen).__name__}"
        + (f" with the keys {keys[:4]}" if keys else "")
        + ": return the trial's `config`, the dict of its hyperparameters (`result.config`)"
    )


def _is_number(value: Any, number: float) -> bool:
    """Whether ``value`` is a plain number close to ``number`` (not an array, not something else)."""
    try:
        return getattr(value, "ndim", 0) == 0 and math.isclose(float(value), number)
    except (TypeError, ValueError):
        return False


def _judge_best(found: Any, results: Any) -> str:
    assert isinstance(found, tuple | list) and len(found) == 2, (
        f"it returned {type(found).__name__}: return a pair, (the best trial's config, its best accuracy)"
    )
    chosen, accuracy = found
    problem = _config_problem(chosen, accuracy)
    assert problem is None, problem
    peaks = {name: max(a for a, _ in curve) for name, curve in CURVES.items()}
    picked = chosen["curve"]
    first = results[0].config.get("curve") if len(results) else None
    last_started = results[len(results) - 1].config.get("curve") if len(results) else None
    assert picked == BEST or not _is_number(accuracy, peaks[BEST]), (
        f"the accuracy is the best trial's ({peaks[BEST]}), but the config is another trial's"
        + (" (the last in the grid: a loop's variable after the loop has ended?)" if picked == last_started else "")
        + ": keep the config of the trial that reached it, together with its accuracy, or ask the grid for that "
        'trial: `results.get_best_result(metric="accuracy", mode="max", scope=...)`'
    )
    assert picked == BEST or picked != first, (
        "you returned the first trial of the grid: a `ResultGrid` lists its trials in the order they started, not "
        'by accuracy. Ask it for the best one: `results.get_best_result(metric="accuracy", mode="max", scope=...)`'
    )
    assert picked != "weak", (
        "you picked the weakest trial (the lowest accuracy, the highest loss): `mode` says which end of the metric "
        'is best, "max" for the largest value, "min" for the smallest. Accuracy is best when highest: '
        'metric="accuracy", mode="max"'
    )
    assert picked != "lowest_loss", (
        "you picked the trial with the lowest validation loss; the exercise ranks by validation accuracy "
        '(metric="accuracy"). The two often agree, not always'
    )
    last, mean = CURVES["steady"][-1][0], np.mean([a for a, _ in CURVES["steady"]])
    assert picked != "steady", (
        f"you picked the trial with the best *last* epoch ({last}) and the best average ({mean:.2f}); another trial "
        f'reached {peaks[BEST]} at an earlier epoch. `get_best_result` compares last reports with scope="last" (its '
        'default) and averages with "avg" or "last-5-avg"; scope="all" compares every epoch. '
        "(`result.metrics` is a trial's last report too, and `get_dataframe()` holds each trial's last report unless "
        "you give it filter_metric and filter_mode)"
    )
    assert picked == BEST, f"you picked the trial {chosen}: look for the highest accuracy at any epoch"
    if hasattr(accuracy, "shape") and getattr(accuracy, "ndim", 0) > 0:
        raise AssertionError(
            f"the second value is a {type(accuracy).__name__} of {len(accuracy)} values (every epoch's accuracy): "
            "return the highest of them, a number (`.max()`)"
        )
    try:
        accuracy = float(accuracy)
    except (TypeError, ValueError):
        raise AssertionError(
            f"the second value is {type(accuracy).__name__}: return the accuracy as a number"
        ) from None
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
        f"({last}) nor the best average ({mean:.2f}) nor the lowest loss"
    )


def check_best_trial(best_trial: Callable[[Any], tuple[dict, float]]) -> Verdict:
    """07.2: ``best_trial(results)`` returns the config and the accuracy of the trial whose validation accuracy was
    highest at any epoch; run on a ResultGrid of made-up trials that the check produces on the cluster."""

    def run() -> str:
        if untouched(best_trial):
            raise NotDone
        attach_ray()
        try:
            results = made_up_results()
        except Exception as error:
            raise AssertionError(
                f"the check's own experiment failed ({first_line(error)}); run the cell again"
            ) from None
        reports = [0 if r.metrics_dataframe is None else len(r.metrics_dataframe) for r in results]
        if len(results) < len(CURVES) or results.num_errors or min(reports) < len(CURVES[BEST]):
            raise AssertionError(
                f"the check's own experiment did not finish within {EXPERIMENT_LIMIT_S} s (a busy cluster?): "
                "run the cell again"
            )
        return _judge_best(_within_hinted(best_trial, results), results)

    return check("07.2", run, limit_s=EXPERIMENT_LIMIT_S + CALL_LIMIT_S + 30)
