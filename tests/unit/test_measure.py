import numpy as np
import pytest

from helpers.measure import busy, mixedness, stamp


def test_mixedness_is_zero_for_order_and_near_one_for_a_shuffle():
    assert mixedness(np.arange(1000)) == pytest.approx(0.0)
    assert mixedness(np.arange(1000)[::-1]) == pytest.approx(0.0)  # reversed is still perfectly ordered
    assert mixedness(np.random.default_rng(0).permutation(1000)) > 0.9


def test_mixedness_is_partial_for_a_local_shuffle():
    rng = np.random.default_rng(0)
    local = np.concatenate([rng.permutation(np.arange(i, i + 100)) for i in range(0, 1000, 100)])
    assert 0.0 < mixedness(local) < 0.1


def test_stamp_and_busy_keep_the_batch():
    batch = {"id": np.arange(3)}
    out = stamp(busy(batch, 0.0), "t")
    assert out["id"].tolist() == [0, 1, 2] and out["t"].shape == (3,) and np.all(out["t"] > 0)
