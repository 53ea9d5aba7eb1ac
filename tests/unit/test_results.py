import json
import sys
from pathlib import Path

import pytest

from course import results
from course.lessons import Lesson, lesson_named

TOY = Lesson(notebook="nb", title="a toy", headline="toy accuracy", floor=0.8, exercises=(), budget="beans")


def test_a_headline_at_or_above_its_floor_is_saved_with_its_name(tmp_path, capsys, monkeypatch):
    monkeypatch.delitem(sys.modules, "ray", raising=False)  # as in a process that never imported Ray
    assert results.record("nb", 0.91, results_dir=tmp_path, lesson=TOY, other=2, skipped=None) is None
    saved = json.loads(results.metrics_path("nb", tmp_path).read_text())
    run = saved.pop("run")
    assert saved == {
        "headline": "toy accuracy",
        "value": 0.91,
        "floor": 0.8,
        "figures": {"other": 2.0},
        "enforced": True,
    }
    # what the site says of the run: this checkout's commit, this machine, no Ray started here, the stand-ins
    assert run["commit"].rstrip("+") and run["cpu_cores"] >= 1 and run["gpus"] is None
    assert (run["sources"], run["size"]) == ("standin", "course")
    assert results.read("nb", tmp_path)["headline"] == "toy accuracy"
    assert "toy accuracy: 0.910 ≥ 0.8 ✓" in capsys.readouterr().out


def test_the_runs_commit_is_known_even_when_gits_status_runs_out_of_time(monkeypatch):
    """A fresh clone's first `git status` passes every notebook through nbstripout: 10 s or more on a loaded machine.
    `make setup` runs it once; if it still runs out of time here, the record keeps the commit without its `+`."""
    import subprocess

    real = subprocess.run

    def slow_status(command, **kwargs):
        if command[:2] == ["git", "status"]:
            raise subprocess.TimeoutExpired(command, kwargs.get("timeout"))
        return real(command, **kwargs)

    monkeypatch.setattr(subprocess, "run", slow_status)
    commit = results.run_facts()["commit"]
    assert commit and not commit.endswith("+"), commit


@pytest.mark.parametrize("value", [0.5, float("nan")])
def test_a_headline_below_its_floor_raises_and_saves_nothing(tmp_path, value):
    with pytest.raises(results.BelowFloor, match="toy accuracy is .* below its floor of 0.8"):
        results.record("nb", value, results_dir=tmp_path, lesson=TOY)
    assert results.read("nb", tmp_path) == {}


def test_a_lesson_records_the_headline_and_floor_of_its_record(tmp_path):
    lesson = lesson_named("03_ray_data")
    results.record("03_ray_data", 0.99, results_dir=tmp_path)
    saved = results.read("03_ray_data", tmp_path)
    assert (saved["headline"], saved["floor"]) == (lesson.headline, lesson.floor)
    with pytest.raises(KeyError, match=r"add a Lesson\(notebook='08_new'"):
        results.record("08_new", 0.99, results_dir=tmp_path)


def test_another_lessons_figures_are_compared_only_when_it_ran_with_these_sources_size_and_gpus(tmp_path, monkeypatch):
    """02b compares its run after a crash with notebook 02's record: only one of the same setup."""
    results.record("02_ray_train_finetune", 0.95, results_dir=tmp_path)
    assert results.same_setup(results.read("02_ray_train_finetune", tmp_path))
    assert not results.same_setup(results.read("02_never_ran", tmp_path)), "no record: nothing to compare with"
    assert "it has no record" in results.setup_difference(results.read("02_never_ran", tmp_path))
    at_the_other_size = not results.smoke()
    monkeypatch.setattr(results, "smoke", lambda: at_the_other_size)
    assert not results.same_setup(results.read("02_ray_train_finetune", tmp_path))


class StartedRay:
    """Ray as ``results`` sees it in a lesson's process, started on a cluster of ``cpus`` CPUs and no GPU."""

    def __init__(self, cpus: int) -> None:
        self.cpus = cpus

    def is_initialized(self) -> bool:
        return True

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": float(self.cpus)}


def test_a_run_on_as_many_ray_train_workers_compares_and_one_on_fewer_does_not_and_says_why(tmp_path, monkeypatch):
    """02 on the course's cluster of 8 CPUs trains on 2 workers, 02b on a 2-core runtime on 1 (the plan: a CPU for
    Ray Data beside each worker): the same sources and size, yet not the same run, and 02b must not hold it to 02's."""
    import course.resources  # a lesson that planned its workers has imported it; results reads the plan from it

    monkeypatch.delenv("COURSE_BUDGET", raising=False)  # the cpu budget, on a cluster without GPUs: 2 workers at most
    monkeypatch.setitem(sys.modules, "course.resources", course.resources)
    monkeypatch.setitem(sys.modules, "ray", StartedRay(cpus=8))
    results.record("02_ray_train_finetune", 0.95, results_dir=tmp_path)
    uncrashed = results.read("02_ray_train_finetune", tmp_path)
    assert uncrashed["run"]["plan_workers"] == 2 and uncrashed["run"]["gpus"] == 0
    monkeypatch.setitem(sys.modules, "ray", StartedRay(cpus=6))  # another cluster, as many workers: 6 // 2 CPUs
    assert results.setup_difference(uncrashed) is None and results.same_setup(uncrashed)
    monkeypatch.setitem(sys.modules, "ray", StartedRay(cpus=2))  # a 2-core runtime: 1 worker
    assert not results.same_setup(uncrashed)
    assert results.setup_difference(uncrashed) == "Ray Train workers: 2 there, 1 here"
    monkeypatch.setenv("COURSE_BUDGET", "gpu")  # and another budget: each difference is named
    assert results.setup_difference(uncrashed) == "budget: cpu there, gpu here; Ray Train workers: 2 there, 1 here"


def test_output_checks_find_repeats_but_not_blank_lines_under_a_ray_prefix():
    from executed import repeats, warnings

    lines = ["(pid=1) ", "(pid=1) ", "", "", "(RayTrainWorker pid=2) epoch 1", "(RayTrainWorker pid=2) epoch 1"]
    assert repeats(lines) == ["(RayTrainWorker pid=2) epoch 1"]
    nested = "(HashAggregateReduce(key_columns=('shape',), num_partitions=2) pid=3) "  # a name with parentheses
    assert repeats([nested, nested]) == []
    killed = "(raylet) Task MapWorker(MapBatches(Featurizer)).submit failed. ... killed by `ray.kill`."
    assert repeats([killed, killed]) == []  # one line per actor of a pool: two actors, the same text
    assert warnings(["x.py:1: FutureWarning: soon", "RayDeprecationWarning: `ExecutionOptions.exclude_resources`"]) == [
        "x.py:1: FutureWarning: soon"
    ]


def a_notebook(markdown: str, *stderr: str) -> dict:
    """A saved notebook: one markdown cell, one code cell whose outputs are the texts ``stderr`` on stderr."""
    outputs = [{"output_type": "stream", "name": "stderr", "text": text} for text in stderr]
    return {
        "cells": [
            {"cell_type": "markdown", "source": [markdown]},
            {"cell_type": "code", "source": ["fit()"], "outputs": outputs, "execution_count": 1},
        ]
    }


POOL = "[2026-11-24 03:53:55,159 E 1 1] core_worker.cc:2465: Actor with class name: 'MapWorker(MapBatches(F))' has "
POOL += "constructor arguments in the object store and max_restarts > 0. If the arguments ...\n"
FAILURE = (
    "\x1b[36m(RayTrainWorker pid=7)\x1b[0m Error in training function:\n"
    "\x1b[36m(RayTrainWorker pid=7)\x1b[0m Traceback (most recent call last):\n"
    '\x1b[36m(RayTrainWorker pid=7)\x1b[0m   File "trainer.py", line 1, in train\n'
    "\x1b[36m(RayTrainWorker pid=7)\x1b[0m     work.wait()\n"
    "\x1b[36m(RayTrainWorker pid=7)\x1b[0m RuntimeError: [gloo/pair.cc:537] Read error: Connection reset by peer\n"
    "\x1b[36m(RayTrainWorker pid=7)\x1b[0m \n"
)


def test_stderr_is_a_finding_unless_the_notebook_names_it_ray_s_own_lines_too():
    from executed import RAYLET_PHRASE, stderr_problems

    assert stderr_problems(a_notebook("Ray warns: its arguments in the object store ...", POOL)) == []
    unexplained = stderr_problems(a_notebook("# Featurize", POOL))
    assert len(unexplained) == 1 and "no markdown cell says what it means" in unexplained[0]
    assert stderr_problems(a_notebook("the other worker logs Error in training function", FAILURE)) == []
    assert len(stderr_problems(a_notebook("# Train", FAILURE))) == 1, "the failure, once, not each of its lines"
    after = FAILURE + "(RayTrainWorker pid=7) Checkpoint successfully created at: Checkpoint(...)\n"
    found = stderr_problems(a_notebook("Error in training function", after))
    assert len(found) == 1 and "Checkpoint successfully created" in found[0], "the traceback ends at its error"
    raylets = "(raylet) [2026-11-29 10:07:59,095 E 12 34] worker.cc:239: Failed to send wait complete\n"
    assert stderr_problems(a_notebook(f"- Any section: {RAYLET_PHRASE} that had already exited", raylets)) == []
    assert len(stderr_problems(a_notebook("# Featurize", raylets))) == 1, "Ray's own lines too, named per lesson"
    died = "(raylet) A worker died or was killed while executing a task by an unexpected system error. ...\n"
    assert len(stderr_problems(a_notebook("# Featurize", died))) == 1
    torn = '2026-11-29 10:07:59,095\tWARNING worker.py:2422 -- [tqdm_ray] Failed to decode {"__magic_token__": "__r'
    torn += ", this may be due to logging too fast.\n"
    assert stderr_problems(a_notebook("- `[tqdm_ray] Failed to decode`: a bar missed one update", torn)) == []
    assert len(stderr_problems(a_notebook("# Featurize", torn))) == 1
    flaky = (
        "(raylet) Task flaky failed. There are 2 retries remaining, so the task will be retried. Error: ray::flaky()\n"
        '(raylet)   File "<ipython-input-3>", line 4, in flaky\n'
        "(raylet) RuntimeError: a flaky failure\n"
    )
    assert stderr_problems(a_notebook("`(raylet) Task flaky failed. There are ... retries remaining`", flaky)) == []
    assert len(stderr_problems(a_notebook("# Retries", flaky))) == 1, "the failure, once, not each of its lines"
    transformers = "[transformers] ViTForImageClassification LOAD REPORT from: data/vit\n"
    assert len(stderr_problems(a_notebook("LOAD REPORT", transformers))) == 1, "only Ray's lines can be explained"
    xgboost = "(RayTrainWorker pid=9) [02:14:02] Task [xgboost.ray-rank=00000001]:a005d5dd got rank 1\n"
    assert stderr_problems(a_notebook("each prints the rank it got ... got rank 0", xgboost)) == []


def test_an_empty_display_is_a_finding_and_a_full_one_or_a_widget_is_not():
    """Ray Tune's notebook reporter at verbose=0 clears the cell's earlier output and leaves an empty HTML block: what
    a Tune cell of notebook 07 showed before it passed ``progress_reporter=tune.CLIReporter()``."""
    from executed import empty_displays

    def with_display(data: dict) -> dict:
        notebook = a_notebook("# Tune")
        notebook["cells"][1]["outputs"].append({"output_type": "display_data", "metadata": {}, "data": data})
        return notebook

    tune_reporter = {"text/plain": "<IPython.core.display.HTML object>", "text/html": ""}
    found = empty_displays(with_display(tune_reporter))
    assert len(found) == 1 and "cell 1 shows an empty text/html output" in found[0] and "CLIReporter" in found[0]
    assert empty_displays(with_display({"text/plain": "", "text/html": ["<table>", "</table>"]})) == []
    widget = {"text/plain": "", "application/vnd.jupyter.widget-view+json": {"model_id": "a1", "version_major": 2}}
    assert empty_displays(with_display(widget)) == []
    assert empty_displays(with_display({"text/plain": "12"})) == [], "plain text is the stream checks' business"


def test_with_the_real_sources_the_real_floor_holds_and_report_prints_it_instead(tmp_path, capsys, monkeypatch):
    real = Lesson(**{**vars(TOY), "real_floor": 0.6})
    monkeypatch.setenv("COURSE_SOURCES", "real")
    results.record("nb", 0.7, results_dir=tmp_path, lesson=real)  # above 0.6: fine with the real sources
    with pytest.raises(results.BelowFloor, match="below its floor of 0.6"):
        results.record("nb", 0.5, results_dir=tmp_path, lesson=real)
    with pytest.raises(results.BelowFloor, match="validation accuracy is 0.500, below the floor of 0.6"):
        results.require_floor("nb", 0.5, "validation accuracy", lesson=real)
    monkeypatch.setenv("COURSE_FLOORS", "report")
    results.record("nb", 0.1, results_dir=tmp_path, lesson=real)
    results.require_floor("nb", 0.1, "validation accuracy", lesson=real)
    saved = results.read("nb", tmp_path)
    assert saved["value"] == 0.1 and saved["floor"] == 0.6 and saved["enforced"] is False
    out = capsys.readouterr().out
    assert "toy accuracy: 0.100 (its floor with the real sources, 0.6, not enforced: COURSE_FLOORS=report)" in out
    assert "validation accuracy: 0.100 (floor 0.6 not enforced" in out


def test_a_ray_workers_crash_report_is_neither_counted_as_lines_nor_a_finding(tmp_path):
    """Tens of lines of C++ stack that Ray prints when a worker it stopped dies inside torch (07 on the real sources,
    2026-11-26): tolerated, and not the lesson's output, so they do not count towards the lines a reader follows."""
    from executed import MAX_LINES, output_lines, problems

    def save(notebook: dict) -> Path:
        notebook |= {"nbformat": 4, "nbformat_minor": 4, "metadata": {}}
        for cell in notebook["cells"]:
            cell["metadata"] = {}
        (tmp_path / "07.ipynb").write_text(json.dumps(notebook))
        return Path("07.ipynb")

    stack = "".join(f"(RayTrainWorker pid=12385) /lib/libc.so.6(+0x{n:x}) frame {n}\n" for n in range(MAX_LINES))
    crash = "(RayTrainWorker pid=12385) [2026-11-26 07:59:59,906 E 12385 12641] logging.cc:125: Stack trace:\n"
    crash += "(RayTrainWorker pid=12385) *** SIGABRT received at time=1764143999 on cpu 1 ***\n" + stack
    named = "- Step 3, rarely: a crash report as Ray ends a worker process"
    notebook = a_notebook(named, crash)
    notebook["cells"][1]["outputs"].insert(0, {"output_type": "stream", "name": "stdout", "text": "accuracy 0.37\n"})
    assert output_lines(save(notebook), tmp_path) == ["accuracy 0.37"]
    assert problems(save(notebook), tmp_path) == []
    unnamed = a_notebook("# Tune", crash)
    assert len(problems(save(unnamed), tmp_path)) == 1, "a crash report, named by its lesson or a finding"
    # the same report in two stream outputs, the second only the stack's frames (03 on a loaded machine, 2026-12-01)
    frames = "(pid=4242) PC: @     0x7f3a2c1d5e6f  (unknown)  raise\n(pid=4242)     @     0x7f3a2c1b0000  (unknown)\n"
    split = a_notebook(named, crash)
    split["cells"][1]["outputs"].append({"output_type": "stream", "name": "stderr", "text": frames})
    assert problems(save(split), tmp_path) == []
    half = crash + "a line of the lesson's own on stderr\n"  # not only Ray's: counted, and a finding
    assert len(output_lines(save(a_notebook("# Tune", half)), tmp_path)) > MAX_LINES
    assert any("wrote to stderr" in found for found in problems(save(a_notebook("# Tune", half)), tmp_path))


def test_at_the_smoke_size_headlines_and_claims_are_printed_beside_their_floors_not_held(tmp_path, capsys, monkeypatch):
    with pytest.raises(results.BelowFloor, match="does not hold: the search did not lose"):
        results.require(False, "the search did not lose")
    results.require(True, "the model learned")  # at the course size a claim that holds prints nothing
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("COURSE_SMOKE", "1")
    results.record("nb", 0.1, results_dir=tmp_path, lesson=TOY)
    results.require_floor("nb", 0.2, "validation accuracy", lesson=TOY)
    results.require(False, "the search did not lose")
    assert results.read("nb", tmp_path)["enforced"] is False
    out = capsys.readouterr().out
    assert "toy accuracy: 0.100 (its floor with the standin sources, 0.8, not enforced: COURSE_SMOKE=1" in out
    assert "validation accuracy: 0.200 (floor 0.8 not enforced: COURSE_SMOKE=1, the smoke size)" in out
    assert "does not hold: the search did not lose (not enforced: COURSE_SMOKE=1, the smoke size)" in out
