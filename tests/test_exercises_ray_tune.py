"""Lesson 07's checks (helpers/exercises/ray_tune.py): "not done yet" for an untouched exercise, one test per half-right
answer each check refuses (never an exception), and done for a right one. The solutions notebook runs them too."""

from __future__ import annotations

import time

import pytest
from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

from helpers.exercises import checking, ray_tune


@pytest.fixture(autouse=True)
def results_here(tmp_path, monkeypatch):
    monkeypatch.setattr(checking, "RESULTS_DIR", tmp_path)


def expect(verdict: checking.Verdict, state: str, *phrases: str) -> None:
    assert verdict.state == state, verdict
    for phrase in phrases:
        assert phrase in verdict.message, verdict


# --- 07.1: a search space and a scheduler for a budget (no Ray needed: Tune's own sampler and the scheduler's calls)


def space(lr=None, batch_size=None) -> dict:
    return {"lr": lr or tune.loguniform(1e-5, 1e-1), "batch_size": batch_size or tune.choice([16, 32, 64])}


def asha(max_epochs: int, **options) -> ASHAScheduler:
    return ASHAScheduler(**({"max_t": max_epochs, "grace_period": 1, "reduction_factor": 2} | options))


def test_search_right():
    verdict = ray_tune.check_search(lambda max_epochs: (space(), asha(max_epochs)))
    expect(verdict, checking.DONE, "log-uniform", "stopped")


def test_search_untouched_is_not_done_yet():
    def make_search(max_epochs):
        raise NotImplementedError

    expect(ray_tune.check_search(make_search), checking.NOT_DONE)


def test_search_uniform_learning_rate():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.uniform(1e-5, 1e-1)), asha(e)))
    expect(verdict, checking.WRONG, "log-uniformly")


def test_search_plain_list_of_batch_sizes():
    verdict = ray_tune.check_search(lambda e: (space(batch_size=[16, 32, 64]), asha(e)))
    expect(verdict, checking.WRONG, "tune.choice")


def test_search_space_that_cannot_be_sampled():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.loguniform(0, 1e-1)), asha(e)))
    expect(verdict, checking.WRONG, "it raised")


def test_search_learning_rate_out_of_range():
    verdict = ray_tune.check_search(lambda e: (space(lr=tune.loguniform(1e-6, 1.0)), asha(e)))
    expect(verdict, checking.WRONG, "keep it between")


def test_search_not_asha():
    verdict = ray_tune.check_search(lambda e: (space(), FIFOScheduler()))
    expect(verdict, checking.WRONG, "ASHAScheduler")


def test_search_wrong_mode_in_the_scheduler():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, metric="accuracy", mode="min")))
    expect(verdict, checking.WRONG, 'mode="min"')


def test_search_budget_ignored():
    verdict = ray_tune.check_search(lambda e: (space(), asha(10)))
    expect(verdict, checking.WRONG, "the budget is 4")


def test_search_no_early_stopping_after_the_first_epoch():
    verdict = ray_tune.check_search(lambda e: (space(), asha(e, grace_period=2)))
    expect(verdict, checking.WRONG, "grace_period")


def test_search_returns_one_thing():
    expect(ray_tune.check_search(lambda e: space()), checking.WRONG, "return a pair")


def test_search_that_never_returns_gets_a_verdict_at_its_limit(monkeypatch):
    monkeypatch.setattr(ray_tune, "CALL_LIMIT_S", 0.5)
    started = time.monotonic()
    verdict = ray_tune.check_search(lambda e: time.sleep(5))
    expect(verdict, checking.WRONG, "did not return within")
    assert time.monotonic() - started < 3


# --- 07.2: the best trial of a ResultGrid (one made-up experiment on Ray, shared by the tests) ----------------------


@pytest.fixture(scope="module")
def made_up_results():
    from helpers.course.cluster import init_ray

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

    expect(checked(best_trial), checking.WRONG, "result.config")
