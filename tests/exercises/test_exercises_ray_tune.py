"""Lesson 07's checks (course/exercises/ray_tune.py): "not done yet" for an untouched exercise, one test per half-right
answer each check refuses (never an exception), and done for a right one. The solutions notebook runs them too.

The wrong answers a learner who half understands Tune writes, each refused below with a message that teaches:

07.1, ``make_search(max_epochs) -> (param_space, scheduler)``:
- the lesson's own search space copied: ``tune.loguniform(1e-4, 1e-2)``, not the exercise's 1e-5 to 1e-1;
- ``tune.uniform`` for the rate, over the whole range or over a lower one (``tune.uniform(1e-5, 1e-3)``);
- the exponents instead of the rates (``tune.uniform(-5, -1)``, ``tune.loguniform(-5, -1)``, a lower bound of 0);
- a rate drawn per decade but uniformly inside it (only the decades' shares right), or ``10 ** randint``;
- the rate as a plain list, a short ``tune.choice``, or ``tune.grid_search``; the key named ``learning_rate``;
- the batch size as ``tune.grid_search([16, 32, 64])`` (every size with every sample), a plain list, strings,
  ``tune.randint(16, 65)``;
- ASHA's default ``reduction_factor`` (4) left in place, or 3, 8, 1.5 (the exercise asks for about half going on),
  or 0.5 or 1 (read as "the share that goes on");
- ``max_t`` hard-coded (the first budget, 4), one epoch over the budget, or short of it; ``stop_last_trials=False``;
- ``grace_period`` of 2 or of ``max_epochs`` (no trial stopped after its first epoch), 0, or above ``max_t``;
- several ``brackets`` (some trials' first rung later than epoch 1);
- ``metric``/``mode`` on the scheduler too (Tune refuses them beside ``TuneConfig``'s), a mode with no metric,
  ``metric="val_loss"``, ``mode="min"``; ``time_attr="time_total_s"``;
- another scheduler (FIFO, HyperBand, median stopping), none, or the class ``ASHAScheduler`` not made;
- the pair in the wrong order, or one thing returned.

07.2, ``best_trial(results) -> (config, accuracy)``, the trial best at any epoch:
- ``get_best_result`` with its default ``scope="last"``, or ``"avg"``, ``"last-5-avg"``, ``"last-10-avg"``;
- ``max(results, key=lambda r: r.metrics["accuracy"])``, or the best row of ``get_dataframe()`` (last reports);
- ``mode="min"`` for accuracy, ``metric="val_loss"`` (with either mode); ``get_best_result`` with no metric or no
  mode (the grid it is given names neither);
- the grid's first trial (``results[0]``); the best accuracy with the last trial's config (a loop's variable);
- the ``Result`` itself, its ``metrics`` (a report), or a row of ``get_dataframe()`` with its 'config/...' keys,
  instead of its ``config``; the pair as (accuracy, config);
- the right trial with its last epoch's accuracy (``result.metrics``), or the whole accuracy column.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from exercise_checks import expect
from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

from course.exercises import checking, ray_tune

# --- 07.1: a search space and a scheduler for a budget (no Ray needed: Tune's own sampler and the scheduler's calls)


def space(lr=None, batch_size=None) -> dict:
    return {"lr": lr or tune.loguniform(1e-5, 1e-1), "batch_size": batch_size or tune.choice([16, 32, 64])}


def asha(max_epochs: int, **options) -> ASHAScheduler:
    return ASHAScheduler(**({"max_t": max_epochs, "grace_period": 1, "reduction_factor": 2} | options))


def test_search_right():
    verdict = ray_tune.check_search(lambda max_epochs: (space(), asha(max_epochs)))
    expect(verdict, checking.DONE, "log-uniform as far as 400 draws tell", "16 quarter-decades", "stopped")


def test_search_other_right_answers():
    """A log-uniform draw written by hand (with np.random: the check seeds it), the bounds the other way round, a list
    for the pair, and ASHA's options that the exercise leaves free, are right too."""
    by_hand = tune.sample_from(lambda spec: float(10 ** np.random.uniform(-5, -1)))
    expect(ray_tune.check_search(lambda e: (space(lr=by_hand), asha(e))), checking.DONE, "log-uniform")
    expect(ray_tune.check_search(lambda e: (space(lr=tune.loguniform(1e-1, 1e-5)), asha(e))), checking.DONE)
    expect(ray_tune.check_search(lambda e: [space(), asha(e)]), checking.DONE)
    expect(ray_tune.check_search(lambda e: (space(), asha(e, reduction_factor=2.0))), checking.DONE)
    expect(ray_tune.check_search(lambda e: (space(), asha(e, time_attr="epoch"))), checking.DONE)
    expect(ray_tune.check_search(lambda e: (space() | {"epochs": e}, asha(e))), checking.DONE)


def test_search_each_decade_its_share_but_uniform_inside_it():
    """Each decade as likely (the decades' shares pass), but a uniform draw inside each: not log-uniform."""
    per_decade = tune.sample_from(lambda spec: float(10.0 ** np.random.randint(-5, -1) * np.random.uniform(1, 10)))
    verdict = ray_tune.check_search(lambda e: (space(lr=per_decade), asha(e)))
    expect(verdict, checking.WRONG, "not evenly inside it", "quarter-decades", "about 25 each", "tune.loguniform")
    assert "log-uniform as far as" not in verdict.message


def test_search_powers_of_ten_only():
    powers = tune.sample_from(lambda spec: float(10.0 ** np.random.randint(-5, 0)))
    expect(ray_tune.check_search(lambda e: (space(lr=powers), asha(e))), checking.WRONG, "took only 5 values")


def test_search_untouched_is_not_done_yet():
    def make_search(max_epochs):
        raise NotImplementedError

    expect(ray_tune.check_search(make_search), checking.NOT_DONE)


def test_search_uniform_learning_rate():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.uniform(1e-5, 1e-1)), asha(e)))
    expect(verdict, checking.WRONG, "log-uniformly", "a uniform draw")


@pytest.mark.parametrize("low, high", [(1e-5, 1e-3), (1e-4, 1e-2)])
def test_search_uniform_learning_rate_over_a_narrower_range(low, high):
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.uniform(low, high)), asha(e)))
    expect(verdict, checking.WRONG, "the whole range from 1e-05 to 0.1", "most of them near its top", "log-uniformly")


def test_search_the_lessons_own_range():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.loguniform(1e-4, 1e-2)), asha(e)))
    expect(verdict, checking.WRONG, "the whole range from 1e-05 to 0.1", "1e-4 to 1e-2")


def test_search_exponents_instead_of_rates():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.uniform(-5, -1)), asha(e)))
    expect(verdict, checking.WRONG, "are those exponents", "tune.loguniform(1e-05, 0.1)")


@pytest.mark.parametrize("low", [-5, 0])
def test_search_exponents_or_zero_given_to_loguniform(low):
    """Tune refuses them as the learner's function runs; the verdict says what its bounds are."""
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.loguniform(low, 1e-1)), asha(e)))
    expect(verdict, checking.WRONG, "it raised ValueError: LogUniform", "takes the bounds themselves, both above 0")


def test_search_learning_rate_under_another_name():
    verdict = ray_tune.check_search(
        lambda e: ({"learning_rate": tune.loguniform(1e-5, 1e-1), "batch_size": tune.choice([16, 32, 64])}, asha(e))
    )
    expect(verdict, checking.WRONG, "the search space has no ['lr']", "`lr` and `batch_size`")


def test_search_learning_rate_as_a_plain_list():
    verdict = ray_tune.check_search(lambda e: (space(lr=[1e-5, 1e-1]), asha(e)))
    expect(verdict, checking.WRONG, "`lr` came out as [1e-05, 0.1] in every trial", "tune.loguniform")


def test_search_learning_rate_from_a_short_list():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.choice([1e-5, 1e-4, 1e-3, 1e-2, 1e-1])), asha(e)))
    expect(verdict, checking.WRONG, "took only 5 values")


def test_search_learning_rate_as_a_grid():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.grid_search([1e-5, 1e-3, 1e-1])), asha(e)))
    expect(verdict, checking.WRONG, "`tune.grid_search` for `lr`", "tune.loguniform")


def test_search_batch_size_as_a_grid():
    verdict = ray_tune.check_search(lambda e: (space(batch_size=tune.grid_search([16, 32, 64])), asha(e)))
    expect(verdict, checking.WRONG, "`tune.grid_search` for `batch_size`", "tune.choice")


def test_search_batch_sizes_as_text():
    verdict = ray_tune.check_search(lambda e: (space(batch_size=tune.choice(["16", "32", "64"])), asha(e)))
    expect(verdict, checking.WRONG, "a str", "whole number")


def test_search_batch_sizes_from_a_range():
    verdict = ray_tune.check_search(lambda e: (space(batch_size=tune.randint(16, 65)), asha(e)))
    expect(verdict, checking.WRONG, "`batch_size` took the values", "one of [16, 32, 64]")


def test_search_pair_in_the_wrong_order():
    verdict = ray_tune.check_search(lambda e: (asha(e), space()))
    expect(verdict, checking.WRONG, "(scheduler, search space)", "(param_space, scheduler)")


def test_search_plain_list_of_batch_sizes():
    verdict = ray_tune.check_search(lambda e: (space(batch_size=[16, 32, 64]), asha(e)))
    expect(verdict, checking.WRONG, "tune.choice")


def test_search_space_that_cannot_be_sampled():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.sample_from(lambda spec: spec.missing)), asha(e)))
    expect(verdict, checking.WRONG, "Tune cannot sample this space", "a search domain such as")


def test_search_learning_rate_out_of_range():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.loguniform(1e-6, 1.0)), asha(e)))
    expect(verdict, checking.WRONG, "keep it between")


@pytest.mark.parametrize("scheduler", [FIFOScheduler(), None])
def test_search_not_asha(scheduler):
    verdict = ray_tune.check_search(lambda e: (space(), scheduler))
    expect(verdict, checking.WRONG, f"the scheduler is a {type(scheduler).__name__}", "ASHAScheduler")


def test_search_the_class_not_a_scheduler():
    verdict = ray_tune.check_search(lambda e: (space(), ASHAScheduler))
    expect(verdict, checking.WRONG, "the class `ASHAScheduler` itself", "make one")


@pytest.mark.parametrize("brackets", [2, 3])
def test_search_several_brackets(brackets):
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, brackets=brackets)))
    expect(verdict, checking.WRONG, f"has {brackets} brackets", "not stopped after its first epoch", "`brackets`")


def test_search_last_trials_not_stopped():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, stop_last_trials=False)))
    expect(verdict, checking.WRONG, "`stop_last_trials=False`", "past `max_t`", "budget of 4 epochs")


def test_search_wrong_mode_in_the_scheduler():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, metric="accuracy", mode="min")))
    expect(verdict, checking.WRONG, 'mode="min"', "lowest* accuracy", "leave both to `TuneConfig`")


def test_search_validation_loss_in_the_scheduler():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, metric="val_loss", mode="min")))
    expect(verdict, checking.WRONG, 'ranks the trials by "val_loss": the trials report it', "TuneConfig")
    assert "do not report" not in verdict.message


def test_search_right_metric_and_mode_in_the_wrong_place():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, metric="accuracy", mode="max")))
    expect(verdict, checking.WRONG, "metric='accuracy' itself", "Tune refuses", "leave both to `TuneConfig`")


def test_search_a_mode_without_a_metric():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, mode="max")))
    expect(verdict, checking.WRONG, "mode='max' itself and leaves the metric unset", "Tune refuses", "TuneConfig")


def test_search_a_metric_without_a_mode():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, metric="accuracy")))
    expect(verdict, checking.WRONG, "metric='accuracy' itself and leaves the mode unset", "Tune refuses")


@pytest.mark.parametrize("factor", [4, 3, 8, 1.5])
def test_search_not_half_going_on(factor):
    options = {} if factor == 4 else {"reduction_factor": factor}  # 4: ASHA's default, left unsaid
    verdict = ray_tune.check_search(lambda e: (space(), ASHAScheduler(max_t=e, grace_period=1, **options)))
    expect(verdict, checking.WRONG, f"reduction_factor={factor:g} lets about {1 / factor:.0%}", "reduction_factor=2")
    assert ("ASHA's default" in verdict.message) == (factor == 4), verdict


@pytest.mark.parametrize("factor", [0.5, 1])
def test_search_reduction_factor_read_as_the_share_going_on(factor):
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, reduction_factor=factor)))
    expect(verdict, checking.WRONG, "Reduction Factor not valid!", "1 in `reduction_factor` goes on", "=2`")


def test_search_time_counted_in_seconds():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, time_attr="time_total_s")))
    expect(verdict, checking.WRONG, '"time_total_s"', "training_iteration")


def test_search_max_t_short_of_the_budget():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e - 1)))
    expect(verdict, checking.WRONG, "no trial trained more than 3 epochs of the 4")


def test_search_another_scheduler():
    from ray.tune.schedulers import HyperBandScheduler, MedianStoppingRule

    for scheduler in (HyperBandScheduler(max_t=4), MedianStoppingRule(grace_period=1)):
        expect(ray_tune.check_search(lambda e, s=scheduler: (space(), s)), checking.WRONG, "ASHAScheduler")


@pytest.mark.parametrize("max_t", [10, 5])
def test_search_budget_ignored_or_one_over(max_t):
    verdict = ray_tune.check_search(lambda e: (space(), asha(max_t if max_t == 10 else e + 1)))
    expect(verdict, checking.WRONG, f"a trial trained {max_t} epochs, but the budget is 4", "max_t")


def test_search_budget_hard_coded_to_the_first_one():
    verdict = ray_tune.check_search(lambda e: (space(), asha(4)))
    expect(verdict, checking.WRONG, "no trial trained more than 4 epochs of the 6", "`max_t`")


@pytest.mark.parametrize("grace", [2, "max_epochs"])
def test_search_no_early_stopping_after_the_first_epoch(grace):
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, grace_period=e if grace == "max_epochs" else grace)))
    expect(verdict, checking.WRONG, "no trial was stopped after its first epoch", "`grace_period`")


def test_search_grace_period_of_zero():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, grace_period=0)))
    expect(verdict, checking.WRONG, "grace_period must be positive", "1 stops weak trials after their first epoch")


def test_search_grace_period_past_the_budget():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, grace_period=e + 1)))
    expect(verdict, checking.WRONG, "grace_period must be <= max_t", "the budget is `max_epochs`")


def test_search_returns_one_thing():
    expect(ray_tune.check_search(lambda e: space()), checking.WRONG, "return a pair")


def test_search_that_never_returns_gets_a_verdict_at_its_limit(monkeypatch):
    monkeypatch.setattr(ray_tune, "CALL_LIMIT_S", 0.5)
    started = time.monotonic()
    verdict = ray_tune.check_search(lambda e: time.sleep(60))
    expect(verdict, checking.WRONG, "did not return within")
    assert time.monotonic() - started < 30, "the verdict waited for the answer (60 s), not for its limit"


def test_search_that_loops_for_ever_is_stopped_at_its_limit_not_left_spinning_in_the_kernel(monkeypatch):
    import threading

    monkeypatch.setattr(ray_tune, "CALL_LIMIT_S", 0.5)
    stopped = threading.Event()

    def spins(max_epochs):
        try:
            while True:
                pass
        finally:
            stopped.set()

    expect(ray_tune.check_search(spins), checking.WRONG, "did not return within")
    assert stopped.wait(60), "the learner's loop still runs after its verdict"


# --- 07.2: the best trial of a ResultGrid (one made-up experiment on Ray, shared by the tests) ----------------------


@pytest.fixture(scope="module")
def made_up_results():
    from course.cluster import init_ray

    init_ray()
    return ray_tune.made_up_results()


@pytest.fixture
def checked(made_up_results, monkeypatch):
    """check_best_trial on the module's experiment (the check itself would run one per call)."""
    monkeypatch.setattr(ray_tune, "made_up_results", lambda: made_up_results)
    return ray_tune.check_best_trial


def best_by(metric="accuracy", mode="max", scope="all", accuracy="best"):
    def best_trial(results):
        chosen = results.get_best_result(metric=metric, mode=mode, scope=scope)
        history = chosen.metrics_dataframe["accuracy"]
        return chosen.config, float(history.max() if accuracy == "best" else chosen.metrics["accuracy"])

    return best_trial


def test_best_trial_untouched_starts_nothing(monkeypatch):
    def best_trial(results):
        raise NotImplementedError

    monkeypatch.setattr(ray_tune, "made_up_results", lambda: pytest.fail("the experiment ran"))
    expect(ray_tune.check_best_trial(best_trial), checking.NOT_DONE)


@pytest.mark.cluster
def test_best_trial_right(checked):
    expect(checked(best_by()), checking.DONE, "0.91")


@pytest.mark.cluster
def test_best_trial_wrong_mode(checked):
    expect(checked(best_by(mode="min")), checking.WRONG, 'mode="max"')


@pytest.mark.cluster
def test_best_trial_last_epochs_compared(checked):
    expect(checked(best_by(scope="last")), checking.WRONG, 'scope="all"')


@pytest.mark.cluster
def test_best_trial_last_epochs_accuracy(checked):
    expect(checked(best_by(accuracy="last")), checking.WRONG, "last epoch's accuracy")


@pytest.mark.cluster
def test_best_trial_ranked_by_loss(checked):
    expect(checked(best_by(metric="val_loss", mode="min")), checking.WRONG, "lowest validation loss")


@pytest.mark.cluster
def test_best_trial_returns_the_result_not_its_config(checked):
    def best_trial(results):
        return results.get_best_result(metric="accuracy", mode="max", scope="all"), 0.91

    expect(checked(best_trial), checking.WRONG, "a `Result`", "result.config")


@pytest.mark.cluster
@pytest.mark.parametrize("scope", ["avg", "last-5-avg", "last-10-avg"])
def test_best_trial_averages_compared(checked, scope):
    expect(checked(best_by(scope=scope)), checking.WRONG, "the best average", 'scope="all"')


@pytest.mark.cluster
def test_best_trial_weakest_by_loss_upside_down(checked):
    expect(checked(best_by(metric="val_loss", mode="max")), checking.WRONG, "the weakest trial", 'mode="max"')


@pytest.mark.cluster
def test_best_trial_first_trial_of_the_grid(checked):
    def best_trial(results):
        return results[0].config, float(results[0].metrics_dataframe["accuracy"].max())

    found = checked(best_trial)
    assert found.state == checking.WRONG and "first trial of the grid" in found.message, found


@pytest.mark.cluster
def test_best_trial_best_accuracy_with_the_loop_variables_config(checked):
    """The walk of c476c86: a loop keeps the best accuracy but returns the loop variable's config after the loop,
    the last trial's (before, the verdict named whatever trial was last, the lowest loss here)."""

    def best_trial(results):
        best_accuracy = 0.0
        for result in results:
            best_accuracy = max(best_accuracy, float(result.metrics_dataframe["accuracy"].max()))
        return result.config, best_accuracy

    verdict = checked(best_trial)
    expect(verdict, checking.WRONG, "the accuracy is the best trial's (0.91)", "the last in the grid", "together")
    assert "validation loss" not in verdict.message


@pytest.mark.cluster
def test_best_trial_from_the_table_of_last_reports(checked):
    def best_trial(results):
        table = results.get_dataframe()  # each trial's last report
        row = table.loc[table["accuracy"].idxmax()]
        return {key[len("config/") :]: value for key, value in row.items() if key.startswith("config/")}, row.accuracy

    expect(checked(best_trial), checking.WRONG, "best *last* epoch", "get_dataframe()")


@pytest.mark.cluster
def test_best_trial_config_as_a_row_of_the_table(checked):
    def best_trial(results):
        table = results.get_dataframe(filter_metric="accuracy", filter_mode="max")
        row = table.loc[table["accuracy"].idxmax()]
        return row.filter(like="config/").to_dict(), float(row["accuracy"])

    verdict = checked(best_trial)
    expect(verdict, checking.WRONG, "keys like 'config/curve'", "column names of `get_dataframe()`", "result.config")
    assert "the first value is dict: return" not in verdict.message
    assert "a row" not in verdict.message  # a dict, named as what it is


@pytest.mark.cluster
def test_best_trial_last_reports_compared_by_hand(checked):
    def best_trial(results):
        chosen = max(results, key=lambda r: r.metrics["accuracy"])  # each trial's last report
        return chosen.config, float(chosen.metrics_dataframe["accuracy"].max())

    expect(checked(best_trial), checking.WRONG, "best *last* epoch", "`result.metrics` is a trial's last report")


@pytest.mark.cluster
def test_best_trial_without_a_metric(checked):
    def best_trial(results):
        chosen = results.get_best_result()  # the check's experiment names no metric in its TuneConfig
        return chosen.config, float(chosen.metrics_dataframe["accuracy"].max())

    expect(checked(best_trial), checking.WRONG, "it raised ValueError: No metric is provided", 'metric="accuracy"')


@pytest.mark.cluster
def test_best_trial_without_a_mode(checked):
    def best_trial(results):
        chosen = results.get_best_result(metric="accuracy", scope="all")
        return chosen.config, float(chosen.metrics_dataframe["accuracy"].max())

    expect(checked(best_trial), checking.WRONG, "it raised ValueError: No mode is provided", 'mode="max"')


@pytest.mark.cluster
def test_best_trial_its_metrics_for_its_config(checked):
    def best_trial(results):
        chosen = results.get_best_result(metric="accuracy", mode="max", scope="all")
        return chosen.metrics, float(chosen.metrics_dataframe["accuracy"].max())

    expect(checked(best_trial), checking.WRONG, "a report of the trial", "not its config", "`result.config`")


@pytest.mark.cluster
def test_best_trial_pair_the_other_way_round(checked):
    def best_trial(results):
        chosen = results.get_best_result(metric="accuracy", mode="max", scope="all")
        return float(chosen.metrics_dataframe["accuracy"].max()), chosen.config

    expect(checked(best_trial), checking.WRONG, "(accuracy, config)", "`(config, accuracy)`")


@pytest.mark.cluster
def test_best_trial_every_epochs_accuracy(checked):
    def best_trial(results):
        chosen = results.get_best_result(metric="accuracy", mode="max", scope="all")
        return chosen.config, chosen.metrics_dataframe["accuracy"]

    expect(checked(best_trial), checking.WRONG, "Series of 3 values", "`.max()`")


@pytest.mark.cluster
def test_best_trial_other_right_answers(checked):
    def by_hand(results):
        chosen = max(results, key=lambda r: r.metrics_dataframe["accuracy"].max())
        return chosen.config, chosen.metrics_dataframe["accuracy"].max()

    def from_the_filtered_table(results):
        table = results.get_dataframe(filter_metric="accuracy", filter_mode="max")  # each trial's best report
        best = table.loc[table["accuracy"].idxmax()]
        config = {key[len("config/") :]: value for key, value in best.items() if key.startswith("config/")}
        return config, float(best["accuracy"])

    def as_a_list(results):
        chosen = results.get_best_result(metric="accuracy", mode="max", scope="all")
        return [chosen.config, chosen.metrics_dataframe["accuracy"].max()]

    expect(checked(by_hand), checking.DONE, "0.91")
    expect(checked(from_the_filtered_table), checking.DONE, "0.91")
    expect(checked(as_a_list), checking.DONE, "0.91")
