"""The real sources, rehearsed: every notebook runs once with ``COURSE_SOURCES=real``, end to end, against stand-ins
of the Hub and S3 on 127.0.0.1 (tests/real_sources.py), through the clients a user's run goes through.

What differs from a user's run: the endpoints (``HF_ENDPOINT``, ``AWS_ENDPOINT_URL``), a fresh Hugging Face cache, and
``COURSE_FLOORS=report`` for the lessons that fine-tune the pretrained model: its weights are random here, so their
headline is printed beside its real-data floor instead of being held to it. The lessons that train from scratch or
need no model (00, 04, 05, 07) learn from the drawn content and are held to their real-data floors. Everything else
is checked as in the normal run: the notebook runs without error, records its headline, reads well (output, warnings,
stderr), listens on 127.0.0.1 only (:func:`executed.run`), and gives each of its exercises the verdict "not done yet".
Each notebook's time, the course's peak memory (the proportional set size of the cluster's and the kernel's
processes) and the disk its checkpoints take are printed beside the laptop targets of docs/instructors.md (figures
to read, not to pass or fail on: a loaded machine is slower).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from executed import EXECUTED, NOTEBOOKS, ROOT, exercise_checks, problems, run
from real_sources import BEANS_ID, build_content, real_services

from helpers.course import config, results
from helpers.course.lessons import lesson_named
from helpers.exercises import checking

CONTENT = ROOT / "results" / "real-sources-content"  # built once, kept between runs (results/ is ignored)
EXECUTED_REAL = EXECUTED.parent / "executed-real"
RESULTS_REAL = ROOT / "results" / "real-sources"
TARGET_SECONDS = 10 * 60  # each lesson on this machine's 2 cores (issue 39)
TARGET_PEAK_GB = 8.0  # the whole cluster and the kernel
TARGET_DISK_GB = 5.0  # checkpoints kept by every lesson together
FIGURES: dict[str, dict] = {}


class MemoryWatch:
    """Samples the proportional set size (PSS: shared pages split between their processes) of the course's processes
    (``ports.course_processes``: the cluster's and the kernel's, not this test's, which serves the stand-ins) every
    ``every`` seconds; :attr:`peak` is the largest sum, in bytes."""

    def __init__(self, every: float = 2.0) -> None:
        self.every, self.peak = every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _sample(self) -> int:
        import psutil
        from ports import course_processes

        total = 0
        for pid in course_processes() - {os.getpid()}:  # not this one: it holds the stand-ins' content
            try:
                total += psutil.Process(pid).memory_full_info().pss
            except (psutil.Error, AttributeError):
                continue
        return total

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(self.every)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def over(value: float, target: float, said: str) -> str:
    """`` (over the target of <said>)`` where ``value`` is over ``target``; else nothing."""
    return f" (OVER the target of {said})" if value > target else ""


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


@pytest.fixture(scope="module")
def real_world(tmp_path_factory):
    """The stand-ins serving, and this process's environment (which the kernels inherit) pointed at them."""
    content = build_content(CONTENT)
    storage = Path(os.environ.get(config.STORAGE_ENV) or config.storage_path()) / "real-sources"
    shutil.rmtree(storage, ignore_errors=True)
    shutil.rmtree(RESULTS_REAL, ignore_errors=True)
    # the labels file notebook 03 writes from the folders on first use: an earlier rehearsal's is not this content's
    Path(config.get_sources("real").imagenette_labels).unlink(missing_ok=True)
    with real_services(content) as (endpoints, hub):
        saved = dict(os.environ)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
            os.environ.pop(name, None)  # a machine without AWS settings: the course must find the region itself
        os.environ.update(
            endpoints,
            COURSE_SOURCES="real",
            COURSE_FLOORS="report",
            COURSE_STORAGE_PATH=str(storage),
            COURSE_RESULTS_DIR=str(RESULTS_REAL),
            HF_HOME=str(tmp_path_factory.mktemp("hf-home")),  # an empty cache: everything comes from the Hub
            HF_HUB_OFFLINE="0",  # the cluster's processes started with the Makefile's 1: the workers get this
            HF_DATASETS_OFFLINE="0",
        )
        try:
            yield {"hub": hub, "storage": storage}
        finally:
            os.environ.clear()
            os.environ.update(saved)
    print("\nthe real sources, rehearsed (drawn content, random weights):")
    for name, figures in FIGURES.items():
        print(f"  {name:<28} " + ", ".join(f"{k} {v}" for k, v in figures.items()))


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_the_real_sources(real_world, path, monkeypatch):
    lesson = lesson_named(path.stem)
    random_weights = "model" in lesson.sources  # the stand-in Hub's pretrained weights: no floor can be reached
    monkeypatch.setenv(config.FLOORS_ENV, "report" if random_weights else "enforce")
    with MemoryWatch() as memory:
        outcome = run(path, EXECUTED_REAL)
    disk = folder_bytes(real_world["storage"])
    recorded = results.read(path.stem, RESULTS_REAL)
    FIGURES[path.stem] = {
        "time": f"{outcome.seconds:.0f} s" + over(outcome.seconds, TARGET_SECONDS, f"{TARGET_SECONDS} s"),
        "headline": f"{recorded.get('value', float('nan')):.3f} (real floor {lesson.floor_for('real')})",
        "peak memory": f"{memory.peak / 1e9:.1f} GB" + over(memory.peak, TARGET_PEAK_GB * 1e9, f"{TARGET_PEAK_GB} GB"),
        "checkpoints so far": f"{disk / 1e9:.2f} GB" + over(disk, TARGET_DISK_GB * 1e9, f"{TARGET_DISK_GB} GB"),
    }
    print(path.stem, FIGURES[path.stem])
    assert outcome.ok, f"{path.name} on the real sources: {outcome.status} (executed copy in {EXECUTED_REAL})"
    assert recorded and recorded["floor"] == lesson.floor_for("real"), recorded
    assert recorded["enforced"] == (not random_weights), recorded  # learnt from drawn content: held to the real floor
    verdicts = checking.read(path.stem.split("_")[0], RESULTS_REAL)
    assert len(verdicts) == len(exercise_checks(path)), verdicts
    assert all(v["state"] == checking.NOT_DONE for v in verdicts.values()), verdicts
    found = problems(path, EXECUTED_REAL)
    assert not found, f"{path.name} on the real sources: " + "; ".join(found)
    if "beans" in lesson.sources:  # the data set came from the Hub, by its real id, through datasets' client
        assert any(BEANS_ID in request for request in real_world["hub"].requests)
