"""Every lesson's declared sources, read through the real clients (the Hub's, S3's) on their stand-ins, the way its
notebook reads them: in minutes, where running every notebook on the real sources takes a quarter of an hour.

With the stand-ins of the Hub and S3 serving (tests/support/real_sources.py, the smoke size's content) and
``COURSE_SOURCES=real``, one process of its own (tests/support/lesson_reads.py, with the environment the rehearsal
gives its kernels: the endpoints, a fresh Hugging Face cache, no AWS settings) attaches to the tests' cluster and, for
each lesson, lists what its record's sources hold, reads a batch through the lesson's own code, loads the model and
processor where it has one, and runs one forward pass on that batch. What the notebook runs on the cluster (Ray
Data's reads, a Ray Train worker's or a Serve replica's loads) runs there too, on the worker node that shares no files
with the checkout. Each test holds what was read: row counts, shapes, label ranges, the logits' shape.

This module is the real sources' row of `.ci/run`'s table ("its real sources", inside the first session). Whole
notebooks on the real sources: `make rehearse` and the weekly workflow, every one at both sizes (docs/development.md,
"The real-sources rehearsal").
"""

from __future__ import annotations

import math
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_sources import (
    BEANS_ID,
    SMOKE_BEANS_SPLITS,
    SMOKE_CIFAR_SPLITS,
    SMOKE_IMAGENETTE_SPLITS,
    build_content,
    real_services,
)
from real_sources_rehearsal import REHEARSAL, SMOKE_CONTENT
from standin_hub import StandinHub

from course import settings
from course.budget import get_budget
from course.lessons import LESSONS
from course.sources import REAL_MODELS
from helpers.catalog import BEANS_CLASSES, IMAGENETTE_SYNSETS

pytestmark = pytest.mark.cluster  # starts Ray (a job of its own on the tests' cluster)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import steps  # noqa: E402  (scripts/ is not a package: .ci/run's table of steps)

READER = ROOT / "tests" / "support" / "lesson_reads.py"
LOG = ROOT / "results" / "real-sources-reads.log"  # what the reader and Ray's workers printed, kept for a look
READ = [lesson.notebook for lesson in LESSONS if lesson.sources]  # 00 declares none
ISOLATED = settings.flag("COURSE_RAY_ISOLATED_NODE_UP")
START_TIMEOUT_S = 300  # the reader's imports and its attach to the cluster, on 2 loaded cores
LESSON_TIMEOUT_S = 300
BUDGET = get_budget(kind="cpu", sources="real", smoke_size=True)  # the stand-in Hub serves the cpu model's weights
DOGS_FISH = sorted(IMAGENETTE_SYNSETS.values())


class Reader:
    """tests/support/lesson_reads.py in a process of its own, asked for one lesson at a time."""

    def __init__(self, env: dict[str, str], log: Path, hub: StandinHub) -> None:
        self.log, self.hub = log, hub
        self.times: dict[str, float] = {}
        started = time.perf_counter()
        read_end, write_end = os.pipe()
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(READER)],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=env | {"LESSON_READS_FD": str(write_end)},
                pass_fds=(write_end,),
                cwd=READER.parent,
            )
        os.close(write_end)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._listen, args=(read_end,), daemon=True).start()
        self.broken = ""  # why no lesson can be asked for any more (one did not answer in time)
        try:
            self.ready = self._next(START_TIMEOUT_S, "to start")
        except BaseException:
            self.close()
            raise
        self.start_s = time.perf_counter() - started

    def _listen(self, fd: int) -> None:
        import json

        with os.fdopen(fd) as answers:
            for line in answers:
                self.answers.put(json.loads(line))
        self.answers.put(None)  # the process ended

    def _next(self, timeout: float, what: str) -> dict:
        try:
            answer = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.broken = f"it took over {timeout} s {what}"
            self.close()
            pytest.fail(f"the lesson reader took over {timeout} s {what}; its output:\n{self.tail()}")
        if answer is None:
            pytest.fail(f"the lesson reader ended (status {self.process.poll()}) {what}; its output:\n{self.tail()}")
        return answer

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def read(self, notebook: str) -> dict:
        """The lesson's facts; a failed test with the reader's traceback where a read failed."""
        if self.broken:
            pytest.fail(f"the lesson reader was stopped: {self.broken}")
        self.process.stdin.write(notebook + "\n")
        self.process.stdin.flush()
        answer = self._next(LESSON_TIMEOUT_S, f"reading {notebook}")
        assert answer["lesson"] == notebook, answer
        self.times[notebook] = answer["seconds"]
        if "error" in answer:
            pytest.fail(f"{notebook}: its sources could not be read as its notebook reads them:\n{answer['error']}")
        return answer["facts"]

    def close(self) -> None:
        if self.process.stdin.closed:
            return
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def reader(request: pytest.FixtureRequest) -> Iterator[Reader]:
    """The stand-ins serving the smoke size's content, and the reader attached to the cluster with the environment a
    rehearsed notebook's kernel gets (real_sources_rehearsal.Rehearsal.start); their times printed at the end."""
    started, started_wall, failed_before = time.perf_counter(), time.time(), request.session.testsfailed
    REHEARSAL.wait_for_the_build()  # started as the session's tests were collected (real_sources_rehearsal)
    content = build_content(SMOKE_CONTENT, smoke=True)  # kept in results/ between runs: built once
    built_s = time.perf_counter() - started
    hf_home = tempfile.mkdtemp(prefix="course-real-sources-hf-home-")  # an empty cache: everything from the Hub
    try:
        with real_services(content) as (endpoints, hub):
            env = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "PYTEST_"))}
            env |= endpoints | {
                "COURSE_SOURCES": "real",
                "COURSE_SMOKE": "1",
                "COURSE_BUDGET": "cpu",
                "HF_HOME": hf_home,
                "HF_HUB_OFFLINE": "0",  # the Makefile's 1 is for the stand-ins; the workers get this through the job
                "HF_DATASETS_OFFLINE": "0",
            }
            reader = Reader(env, LOG, hub)
            try:
                yield reader
            finally:
                reader.close()
                report(request, reader, built_s)
                failed = request.session.testsfailed > failed_before
                steps.record("its real sources", started_wall, time.perf_counter() - started, int(failed))
    finally:
        shutil.rmtree(hf_home, ignore_errors=True)


def report(request: pytest.FixtureRequest, reader: Reader, built_s: float) -> None:
    """Each lesson's time, written past pytest's capture (as ``capsys.disabled()`` does): shown on a pass too."""
    terminal = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if terminal is None or capture is None:
        return
    total = sum(reader.times.values())
    with capture.global_and_fixture_disabled():
        terminal.write_line("")
        terminal.write_line(
            f"the real sources, lesson by lesson: {total:.0f} s for {len(reader.times)} lessons (and "
            f"{reader.start_s:.0f} s to start the reader, {built_s:.0f} s for the stand-ins' content)"
        )
        for notebook, seconds in reader.times.items():
            terminal.write_line(f"  {notebook:<28} {seconds:5.1f} s")


def test_every_lesson_with_sources_is_read_here():
    """A new lesson's sources are read here too: tests/support/lesson_reads.py needs a reader for it."""
    from lesson_reads import READERS

    assert sorted(READERS) == sorted(READ), "add the lesson's reader to tests/support/lesson_reads.py's READERS"


def ran_on_a_worker_node(facts: dict, reader: Reader) -> None:
    """On the tests' cluster (an isolated worker node), the code a Ray worker runs ran on the node without the
    checkout; on another cluster, only that it ran in Ray."""
    where = facts["where"]
    if ISOLATED:
        assert where["node"] != reader.ready["node"] and not where["sees_checkout"], where


def hub_listing(facts: dict) -> None:
    listed = facts["listed"]
    assert facts["kind"] == "real" and facts["model"] == REAL_MODELS["cpu"], facts
    assert {"config.json", "preprocessor_config.json", "model.safetensors"} <= set(listed["model"]), listed["model"]


def beans_batch(facts: dict) -> None:
    """Beans from the Hub, its card's parquet files only, the model's processor and new head, one forward pass."""
    hub_listing(facts)
    assert {f"data/{split}-00000-of-00001.parquet" for split in SMOKE_BEANS_SPLITS} <= set(facts["listed"]["beans"])
    assert facts["splits"] == SMOKE_BEANS_SPLITS, facts["splits"]
    assert facts["class_names"] == BEANS_CLASSES and {"image", "labels"} <= set(facts["columns"]), facts
    assert facts["pixel_values"] == [4, 3, 224, 224], facts["pixel_values"]  # the real model's input
    assert len(facts["labels"]) == 4 and set(facts["labels"]) <= set(range(len(BEANS_CLASSES))), facts["labels"]
    assert facts["logits"] == [4, len(BEANS_CLASSES)] and math.isfinite(facts["loss"]), facts


@pytest.mark.parametrize("notebook", READ)
def test_the_lesson_reads_its_sources_and_runs_a_forward_pass(reader: Reader, notebook: str):
    facts = reader.read(notebook)
    if notebook == "01_local_finetune":
        beans_batch(facts)
        assert any(BEANS_ID in request for request in reader.hub.requests), "beans came from the Hub, by its real id"
    elif notebook in ("02_ray_train_finetune", "02b_fault_tolerance"):
        beans_batch(facts)
        ran_on_a_worker_node(facts, reader)
    elif notebook == "02c_debugging":
        cifar10(facts)
        worker = facts["worker"]
        assert worker["rows"] == BUDGET.debug.train_size and worker["images"] == [8, 3, 32, 32], worker
        assert worker["logits"] == [8, 10] and set(worker["labels"]) <= set(range(10)), worker
        ran_on_a_worker_node(worker, reader)
    elif notebook == "04b_fsdp":
        cifar10(facts)
        worker = facts["worker"]
        assert worker["rows"] == BUDGET.fsdp.train_size // 2 and worker["images"] == [8, 3, 32, 32], worker
        assert worker["logits"] == [8, 10] and set(worker["labels"]) <= set(range(10)), worker
        ran_on_a_worker_node(worker, reader)
    elif notebook == "03_ray_data":
        hub_listing(facts)
        folders = {"/".join(folder.split("/")[-2:]): n for folder, n in facts["listed"]["imagenette"].items()}
        splits = SMOKE_IMAGENETTE_SPLITS
        assert folders == {f"{split}/{s}": n for split, counts in splits.items() for s, n in counts.items()}, folders
        per_class = {IMAGENETTE_SYNSETS[s]: sum(counts[s] for counts in splits.values()) for s in IMAGENETTE_SYNSETS}
        assert facts["label_rows"] == facts["listed"]["imagenette_labels"] == per_class, facts["label_rows"]
        assert facts["class_names"] == DOGS_FISH and set(facts["labels"]) <= {0, 1}, facts
        assert facts["pixel_values"] == [4, 3, 224, 224] and facts["logits"] == [4, 2], facts
        # the label join: each photo of train/<synset>/ (named <synset>_<n>.JPEG) got its folder's class
        synsets = [name.split("_")[0] for name in facts["file_names"]]
        assert facts["labels"] == [DOGS_FISH.index(IMAGENETTE_SYNSETS[s]) for s in synsets], facts
        assert math.isfinite(facts["loss"]), facts
        ran_on_a_worker_node(facts, reader)
    elif notebook == "04_cifar10_pytorch_to_ray":
        cifar10(facts)
        preview, worker, ray_data = facts["preview"], facts["worker"], facts["ray_data"]
        assert preview["images"] == [8, 32, 32, 3] and preview["dtype"] == "uint8", preview
        assert set(preview["labels"]) <= set(range(10)), preview
        low, high = facts["normalised"]["range"]
        assert facts["normalised"]["shape"] == [8, 3, 32, 32] and -1 <= low < high <= 1, facts["normalised"]
        assert ray_data["image"] == [8, 3, 32, 32] and ray_data["dtype"] == "float32", ray_data
        assert set(ray_data["labels"]) <= set(range(10)), ray_data
        assert worker["train_rows"] == BUDGET.cifar.train_size and worker["valid_rows"] == BUDGET.cifar.valid_size
        batch = worker["images"][0]
        assert worker["images"] == [batch, 3, 32, 32] and worker["logits"] == [batch, 10], worker
        assert -1 <= worker["pixel_range"][0] < worker["pixel_range"][1] <= 1, worker
        ran_on_a_worker_node(worker, reader)
    elif notebook == "05_data_loading_playbook":
        cifar10(facts)
        rows = BUDGET.playbook.rows
        assert facts["train_rows"] + facts["valid_rows"] == rows and facts["valid_rows"] == rows // 4, facts
        assert facts["x"] == [16, 3 * 32 * 32] and facts["logits"] == [16, 10], facts
        assert set(facts["labels"]) <= set(range(10)), facts["labels"]
    elif notebook == "06_ray_serve":
        hub_listing(facts)
        val = SMOKE_IMAGENETTE_SPLITS["val"]
        assert facts["held_out"] == {IMAGENETTE_SYNSETS[s]: n for s, n in val.items()}, facts["held_out"]
        assert facts["smallest_body"] > 1000, "every held-out file has its photo's bytes"
        assert facts["image"][0] == "RGB" and min(facts["image"][1:]) >= 224, facts["image"]  # a photo, any size
        assert facts["probabilities"] == [1, 2] and facts["total"] == pytest.approx(1, abs=1e-4), facts
        assert facts["class_names"] == DOGS_FISH and facts["answer"]["label"] in DOGS_FISH, facts
        ran_on_a_worker_node(facts, reader)
    elif notebook == "07_ray_tune":
        cifar10(facts)
        tune = BUDGET.tune
        assert facts["train_rows"] == tune.train_size and facts["valid_rows"] == tune.valid_size, facts
        batch = max(tune.batch_sizes)
        assert facts["images"] == [batch, 3, 32, 32] and facts["logits"] == [batch, 10], facts
        assert facts["test"]["images"] == [tune.test_size, 32, 32, 3], facts["test"]
        assert set(facts["test"]["labels"]) <= set(range(10)) and set(facts["labels"]) <= set(range(10)), facts
        ran_on_a_worker_node(facts, reader)
    else:
        pytest.fail(f"{notebook}: no check of what it read: add one here")


def cifar10(facts: dict) -> None:
    """CIFAR-10's parquet parts on S3, in both splits."""
    assert facts["kind"] == "real", facts
    parts = {split: -(-rows // 10_000) for split, rows in SMOKE_CIFAR_SPLITS.items()}  # real_sources.cifar_objects
    assert facts["listed"]["cifar10"] == parts, facts["listed"]
