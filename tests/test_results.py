import json

import pytest

from helpers import results


def test_a_headline_at_or_above_its_floor_is_saved_with_its_name(tmp_path, capsys):
    assert results.record("nb", "toy accuracy", 0.91, floor=0.8, results_dir=tmp_path, other=2, skipped=None) is None
    assert json.loads(results.metrics_path("nb", tmp_path).read_text()) == {
        "headline": "toy accuracy",
        "value": 0.91,
        "floor": 0.8,
        "figures": {"other": 2.0},
    }
    assert results.read("nb", tmp_path)["headline"] == "toy accuracy"
    assert "toy accuracy: 0.910 ≥ 0.8 ✓" in capsys.readouterr().out


@pytest.mark.parametrize("value", [0.5, float("nan")])
def test_a_headline_below_its_floor_raises_and_saves_nothing(tmp_path, value):
    with pytest.raises(results.BelowFloor, match="toy accuracy is .* below its floor of 0.8"):
        results.record("nb", "toy accuracy", value, floor=0.8, results_dir=tmp_path)
    assert results.read("nb", tmp_path) == {}


def test_output_checks_find_repeats_but_not_blank_lines_under_a_ray_prefix():
    from executed import repeats, warnings

    lines = ["(pid=1) ", "(pid=1) ", "", "", "(RayTrainWorker pid=2) epoch 1", "(RayTrainWorker pid=2) epoch 1"]
    assert repeats(lines) == ["(RayTrainWorker pid=2) epoch 1"]
    nested = "(HashAggregateReduce(key_columns=('shape',), num_partitions=2) pid=3) "  # a name with parentheses
    assert repeats([nested, nested]) == []
    assert warnings(["x.py:1: FutureWarning: soon", "RayDeprecationWarning: `ExecutionOptions.exclude_resources`"]) == [
        "x.py:1: FutureWarning: soon"
    ]
