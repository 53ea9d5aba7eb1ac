"""Lesson 02c on one node (a Ray of its own, as on Colab, or `make run` where no cluster is up): no node can leave, so
section 6 says what a cluster shows and skips the node's departure rather than faking it. Its record then holds no
figure of the elastic run, and `make run`'s claims report names those claims as not measured there, not as failed.

Here, with no cluster on the machine (the hosted-runtime step of `make test`), at the smoke size."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from executed import headline_problem, problems

from course import results

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import run_course  # noqa: E402  (scripts/ is not a package)

NOTEBOOK = ROOT / "notebooks" / "02c_debugging.ipynb"
ELASTIC_FIGURES = ("world_size_before_leaving", "least_world_size", "last_world_size", "steps", "steps_reported")
pytestmark = pytest.mark.notebook


def test_02c_on_one_node_skips_the_node_that_leaves_and_says_why(tmp_path, monkeypatch, ray_temp_dir, left_running):
    for name in [name for name in run_course.kernel_env() if name.startswith(("COURSE_", "RAY_"))]:
        monkeypatch.delenv(name, raising=False)  # no cluster's address, nor its settings
    monkeypatch.setenv("RAY_TMPDIR", ray_temp_dir)  # nor another cluster on this machine to attach to
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path / "results"))
    outcome = run_course.execute(NOTEBOOK, tmp_path, env={"COURSE_SMOKE": "1"})
    assert outcome.ok, outcome.status
    executed = (tmp_path / NOTEBOOK.name).read_text()
    assert "This Ray runs on one node" in executed and "The cells below skip it here" in executed
    assert not problems(NOTEBOOK, tmp_path), problems(NOTEBOOK, tmp_path)
    record = results.read(NOTEBOOK.stem, tmp_path / "results")
    assert not headline_problem(record) and not set(ELASTIC_FIGURES) & set(record["figures"]), record
    assert record["figures"]["timeout_errors"] >= 1, record  # the sections before it ran as on the cluster
    course_size = {NOTEBOOK.name: record | {"run": record["run"] | {"size": "course"}}}
    report, held = run_course.claims_report(course_size)
    assert held and report.count("  not measured: 02c_debugging:") == 3, report
    left = left_running(ray_temp_dir)
    assert not left, f"left running: {[p.info['cmdline'][:2] for p in left]}"
