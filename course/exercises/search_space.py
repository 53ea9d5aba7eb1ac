"""The search space of lesson 07's exercise 07.1 (Ray Tune), judged for :mod:`course.exercises.ray_tune` on the rules
of :mod:`course.exercises.checking`: the learner's ``param_space`` sampled the way Tune's random search samples it, then
``lr`` held to a log-uniform draw over the whole range (by decades, then by a chi-square over quarter-decades) and
``batch_size`` to one of three sizes per trial (:func:`judge_space`). The scheduler of the same exercise is judged
in :mod:`course.exercises.ray_tune`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from course.deadline import first_line

# What 07.1 asks the space to draw: lr log-uniform over LR_RANGE, batch_size one of BATCH_SIZES per trial
LR_RANGE = (1e-5, 1e-1)
BATCH_SIZES = {16, 32, 64}
SAMPLES = 400  # draws from the learner's space
BINS_PER_DECADE = 4  # the log-uniform test counts the draws of lr in quarter-decades: 16 bins of about 25 draws each
# Pearson's chi-square of those 16 counts against 25 each, above which the draws are not log-uniform: its 99.99th
# percentile for 15 degrees of freedom (scipy.stats.chi2.ppf(0.9999, 15) = 44.3). Tune's own loguniform, drawn with
# the check's seed, scores 13.5; a uniform draw 1432; a draw uniform within each decade (each decade as likely, but
# the low end of each crowded out) 181.
CHI_SQUARE_LIMIT = 45.0


def _is_grid(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"grid_search"}


def _samples(param_space: Any) -> list[dict]:
    """``SAMPLES`` configurations drawn from ``param_space`` the way Tune's random search draws them."""
    from ray.tune.schedulers import TrialScheduler
    from ray.tune.search.variant_generator import generate_variants

    assert not isinstance(param_space, TrialScheduler), (
        "the pair came back as (scheduler, search space): return `(param_space, scheduler)`, in that order"
    )
    assert isinstance(param_space, dict), (
        f"the search space is a {type(param_space).__name__}: make it a dict, one entry per hyperparameter"
    )
    missing = {"lr", "batch_size"} - set(param_space)
    assert not missing, f"the search space has no {sorted(missing)}: name the entries `lr` and `batch_size`"
    assert not _is_grid(param_space["batch_size"]), (
        "`tune.grid_search` for `batch_size` runs every sample once per size: num_samples x 3 trials, every size "
        "tried with every learning rate drawn. The exercise asks for one size drawn per trial: `tune.choice([...])`"
    )
    assert not _is_grid(param_space["lr"]), (
        "`tune.grid_search` for `lr` runs every value listed, each with every sample: the exercise asks for a "
        "learning rate drawn from a range in each trial (`tune.loguniform(low, high)`)"
    )
    rng = np.random.RandomState(0)
    outside = np.random.get_state()  # an answer may draw with np.random itself (`tune.sample_from`): seeded too
    np.random.seed(0)
    try:
        return [
            config for _ in range(SAMPLES) for _, config in generate_variants(param_space, random_state=rng)
        ]  # one variant per draw unless the space holds a grid_search
    except Exception as error:
        raise AssertionError(
            f"Tune cannot sample this space ({first_line(error)}): "
            "each entry is a constant or a search domain such as `tune.loguniform(low, high)` or `tune.choice([...])`"
        ) from None
    finally:
        np.random.set_state(outside)


def is_plain_number(value: Any) -> bool:
    """A number as Python or numpy holds it, and not a bool (a drawn ``lr``; 07.2's returned accuracy too)."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def _quarter_decade_counts(rates: np.ndarray, low: float, high: float) -> np.ndarray:
    """The draws of ``rates`` counted in ``BINS_PER_DECADE * 4`` equal steps of log10 from ``low`` to ``high``
    (quarter-decades over 1e-5..1e-1)."""
    edges = np.linspace(math.log10(low), math.log10(high), 4 * BINS_PER_DECADE + 1)
    return np.histogram(np.log10(rates), bins=edges)[0]


def _log_even(rates: np.ndarray, counts: np.ndarray) -> bool:
    """Whether ``rates``, counted in ``counts`` (:func:`_quarter_decade_counts`), look log-uniform: Pearson's
    chi-square of the counts against an even share under ``CHI_SQUARE_LIMIT``."""
    expected = len(rates) / len(counts)
    return float(((counts - expected) ** 2 / expected).sum()) < CHI_SQUARE_LIMIT


def judge_space(param_space: dict) -> str:
    configs = _samples(param_space)
    sizes = [c["batch_size"] for c in configs]
    assert not isinstance(sizes[0], list | tuple), (
        f"`batch_size` came out as {sizes[0]!r} in every trial: a plain list is passed to every trial as it is; "
        "`tune.choice([...])` picks one of its values per trial"
    )
    odd = next((s for s in sizes if not isinstance(s, int | np.integer) or isinstance(s, bool)), None)
    assert odd is None, (
        f"`batch_size` came out as {odd!r}, a {type(odd).__name__}: a DataLoader needs a whole number, "
        f"`tune.choice({sorted(BATCH_SIZES)})`"
    )
    assert set(sizes) == BATCH_SIZES, (
        f"`batch_size` took the values {sorted(set(sizes))[:8]} in {SAMPLES} draws: the exercise asks for one of "
        f"{sorted(BATCH_SIZES)} per trial (`tune.choice`)"
    )
    low, high = LR_RANGE
    rates = [c["lr"] for c in configs]
    assert all(is_plain_number(r) for r in rates), (
        f"`lr` came out as {rates[0]!r} in every trial: a plain list (or other constant) is passed to every trial as "
        f"it is; `tune.loguniform({low:g}, {high:g})` draws one learning rate per trial"
    )
    rates = np.array(rates, dtype=float)
    assert rates.max() > 0, (
        f"`lr` went from {rates.min():.2g} to {rates.max():.2g}: are those exponents? `tune.loguniform` takes the "
        f"bounds themselves, `tune.loguniform({low:g}, {high:g})`"
    )
    assert np.all((rates >= low * 0.999) & (rates <= high * 1.001)), (
        f"`lr` went from {rates.min():.2g} to {rates.max():.2g}: keep it between {low:g} and {high:g}"
    )
    distinct = len(set(rates.round(12)))
    assert distinct > SAMPLES // 2, f"`lr` took only {distinct} values in {SAMPLES} draws: sample it from a range"
    decades = np.histogram(np.log10(rates), bins=np.arange(math.log10(low), math.log10(high) + 0.5))[0] / len(rates)
    shares = ", ".join(f"{share:.0%}" for share in decades)
    uniform = (
        f"the learning rates drawn fall {shares} into the decades from {low:g} to {high:g}: a uniform draw puts "
        "almost every trial in the top decade. Learning rates matter by factors: draw them log-uniformly "
        "(`tune.loguniform`), each decade as likely as the next"
    )
    assert decades[-1] < 0.6, uniform
    edge = 10**0.25  # a quarter of a decade: 400 draws spread over four decades come far closer to both ends
    narrow = rates.min() >= low * edge or rates.max() <= high / edge
    logs = np.log10(rates)
    crowded = "most of them near its top" if np.median(logs) > (logs.min() + logs.max()) / 2 else "unevenly"
    assert not narrow or _log_even(rates, _quarter_decade_counts(rates, rates.min(), rates.max())), (
        f"`lr` went from {rates.min():.2g} to {rates.max():.2g} in {SAMPLES} draws, {crowded}: the exercise asks "
        f"for the whole range from {low:g} to {high:g}, drawn log-uniformly (`tune.loguniform`), each decade as "
        "likely as the next"
    )
    assert not narrow, (
        f"`lr` went from {rates.min():.2g} to {rates.max():.2g} in {SAMPLES} draws: the exercise asks for the whole "
        f"range from {low:g} to {high:g} (step 1 of the lesson searched a narrower one, 1e-4 to 1e-2)"
    )
    assert decades.min() > 0.15, (
        f"the learning rates drawn fall {shares} into the decades from {low:g} to {high:g}, not evenly. Learning "
        "rates matter by factors: draw them log-uniformly (`tune.loguniform`), each decade as likely as the next"
    )
    counts = _quarter_decade_counts(rates, low, high)
    bins, expected = len(counts), len(rates) / len(counts)
    assert _log_even(rates, counts), (
        f"each decade from {low:g} to {high:g} drew its share ({shares}), but not evenly inside it: counted in "
        f"quarter-decades, the {SAMPLES} draws give from {counts.min()} to {counts.max()} where a log-uniform draw "
        f"gives about {expected:.0f} each (its logarithm is uniform: every step of the same size in log10(lr) as "
        "likely as the next, inside a decade too). `tune.loguniform(low, high)` draws that way"
    )
    return (
        f"`lr` log-uniform as far as {SAMPLES} draws tell: its logarithm spread evenly over {bins} quarter-decades "
        f"(each decade {shares}), `batch_size` one of {sorted(BATCH_SIZES)} per trial"
    )
