"""The real sources, rehearsed: nbmake runs notebooks once with ``COURSE_SOURCES=real``, end to end, against
stand-ins of the Hub and S3 on 127.0.0.1 (tests/support/real_sources.py), through the clients a user's run goes through.

A pytest plugin (the repository's conftest.py loads it) around nbmake's items. `make rehearse` (every notebook, or
those ``LESSONS`` names, at the smoke size and then at the course size: ``SIZE``) and `make test` (notebooks 03 and
04 at the smoke size) pass ``--nbmake --overwrite`` and the folder :data:`EXECUTED_REAL`, or copies in it: at the
start of the session the plugin copies every lesson's notebook there, nbmake collects the copies asked for and runs
each one, writing its outputs back into the copy (``--overwrite``), and the committed notebooks stay without outputs.
The plugin acts on those items only: a notebook run by hand (``pytest --nbmake notebooks/02_ray_train_finetune.ipynb``)
is nbmake's alone. (Every lesson's reads of its sources, without the rest of its notebook, are
tests/cluster/test_real_sources.py's: the plugin builds the smoke size's content for it while the tests before it run.)

What differs from a user's run: the endpoints (``HF_ENDPOINT``, ``AWS_ENDPOINT_URL``), a fresh Hugging Face cache, and
``COURSE_FLOORS=report`` for the lessons that fine-tune the pretrained model: its weights are random here, so their
headline is printed beside its real-data floor instead of being held to it. The lessons that train from scratch or
need no model (00, 04, 05, 07) learn from the drawn content and are held to their real-data floors (at the course
size; at the smoke size no headline is held to its floor, every one is printed beside it). Everything else
is checked as in the normal run, after nbmake has run the notebook: it records its headline, reads well (output,
warnings, stderr), listens on 127.0.0.1 only, and gives each of its exercises the verdict "not done yet". Each
notebook's time, the course's peak memory (the proportional set size of the cluster's and the kernel's processes)
and the disk its checkpoints take are printed at the end of the session beside the laptop targets of
docs/instructors.md (figures to read, not to pass or fail on: a loaded machine is slower; `make rehearse` gives the
course size's), and written to ``results/rehearsal/figures-<size>.md`` with each one's outcome.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXECUTED_REAL = ROOT / "results" / "executed-real"  # the copies nbmake runs and overwrites with their outputs
CONTENT = ROOT / "results" / "real-sources-content"  # built once, kept between runs (results/ is ignored)
SMOKE_CONTENT = ROOT / "results" / "real-sources-content-smoke"  # fewer photos, for the smoke size (COURSE_SMOKE=1)
RESULTS_REAL = ROOT / "results" / "real-sources"  # the headlines and exercise verdicts the copies record
# each size's figures (figures-smoke.md, figures-course.md) and executed copies: the weekly workflow keeps them
FIGURES = ROOT / "results" / "rehearsal"
READS_TEST = "test_real_sources.py"  # every lesson's reads on the real sources, in the tests' first session
TARGET_SECONDS = 10 * 60  # each lesson on this machine's 2 cores (issue 39)
TARGET_PEAK_GB = 8.0  # the whole cluster and the kernel
TARGET_DISK_GB = 5.0  # checkpoints kept by every lesson together


class MemoryWatch:
    """Samples the proportional set size (PSS: shared pages split between their processes) of the course's processes
    (``ports.course_processes``: the cluster's and the kernel's, not pytest's, which serves the stand-ins) every
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


def content_folder() -> tuple[Path, bool]:
    """Where the stand-ins' content is built, and whether at the smoke size (``COURSE_SMOKE=1``: fewer photos)."""
    from course import config

    smoke = config.smoke()
    return (SMOKE_CONTENT if smoke else CONTENT), smoke


def is_rehearsed(item: pytest.Item) -> bool:
    """Whether ``item`` is nbmake's item for a copy in :data:`EXECUTED_REAL`."""
    return getattr(item, "nbmake", False) and Path(str(item.path)).parent == EXECUTED_REAL


class Rehearsal:
    """The stand-ins serving, and this process's environment (which the kernels inherit) pointed at them, from the
    first rehearsed notebook to the last; then each notebook's figures."""

    def __init__(self) -> None:
        self.services: ExitStack | None = None
        self.building: subprocess.Popen | None = None  # the stand-ins' content, built while the other tests run
        self.storage = Path()  # where the lessons keep their checkpoints during the rehearsal
        self.saved: dict[str, str] = {}
        self.hub = None
        self.figures: dict[str, dict[str, str]] = {}
        self.outcomes: dict[str, str] = {}  # each rehearsed notebook's: passed or failed

    def build_in_the_background(self, smoke: bool | None = None) -> None:
        """Start building the stand-ins' content (about 40 s of one core) in a process of its own: `make test` runs
        the rehearsal after its other tests, and :meth:`start` then finds it built. ``smoke``: the smoke size's
        content (None: as ``COURSE_SMOKE`` says)."""
        code = "import sys, pathlib, real_sources as r; r.build_content(pathlib.Path(sys.argv[1]), sys.argv[2] == '1')"
        if smoke is None:
            content, smoke = content_folder()
        else:
            content = SMOKE_CONTENT if smoke else CONTENT
        content.parent.mkdir(parents=True, exist_ok=True)
        with open(content.parent / f"{content.name}.log", "w") as log:
            self.building = subprocess.Popen(
                [sys.executable, "-c", code, str(content), "1" if smoke else "0"],
                cwd=Path(__file__).parent,
                stdout=log,
                stderr=log,
            )

    def wait_for_the_build(self) -> None:
        """Whatever the background build did: built (then ``build_content`` finds it) or not (then it builds)."""
        if self.building is not None:
            self.building.wait()
            self.building = None

    def start(self) -> None:
        from real_sources import build_content, real_services

        from course import config
        from course.sources import get_sources
        from course.storage import storage_path

        self.wait_for_the_build()
        content = build_content(*content_folder())
        self.storage = Path(os.environ.get(config.STORAGE_ENV) or storage_path()) / "real-sources"
        shutil.rmtree(self.storage, ignore_errors=True)
        shutil.rmtree(RESULTS_REAL, ignore_errors=True)
        # the labels file notebook 03 writes from the folders on first use: an earlier rehearsal's is not this content's
        Path(get_sources("real").imagenette_labels).unlink(missing_ok=True)
        self.services = ExitStack()
        endpoints, self.hub = self.services.enter_context(real_services(content))
        hf_home = tempfile.mkdtemp(prefix="course-rehearsal-hf-home-")  # an empty cache: everything from the Hub
        self.services.callback(shutil.rmtree, hf_home, ignore_errors=True)
        self.saved = dict(os.environ)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
            os.environ.pop(name, None)  # a machine without AWS settings: the course must find the region itself
        os.environ.update(
            endpoints,
            COURSE_SOURCES="real",
            COURSE_FLOORS="report",
            COURSE_STORAGE_PATH=str(self.storage),
            COURSE_RESULTS_DIR=str(RESULTS_REAL),
            HF_HOME=hf_home,
            HF_HUB_OFFLINE="0",  # the cluster's processes started with the Makefile's 1: the workers get this
            HF_DATASETS_OFFLINE="0",
        )

    def stop(self) -> None:
        if self.services is not None:
            os.environ.clear()
            os.environ.update(self.saved)
            self.services.close()
            self.services = None

    def run(self, item: pytest.Item):
        """Run nbmake's ``runtest`` (the generator's ``yield``), watched; then check the executed copy."""
        from executed import exercise_checks, problems, run_course
        from ports import SocketWatch
        from real_sources import BEANS_ID

        from course import config, results
        from course.exercises import checking
        from course.lessons import lesson_named

        path = Path(str(item.path))
        lesson = lesson_named(path.stem)
        random_weights = "model" in lesson.sources  # the stand-in Hub's pretrained weights: no floor can be reached
        kernel_env = {config.FLOORS_ENV: "report" if random_weights else "enforce"}
        hidden = {name: os.environ.pop(name) for name in run_course.NOT_FOR_THE_KERNEL if name in os.environ}
        os.environ.update(kernel_env)
        start = time.perf_counter()
        try:
            with SocketWatch(path.stem) as sockets, MemoryWatch() as memory:
                yield  # nbmake runs the copy and writes it back with its outputs
        finally:
            os.environ.update(hidden)
            self.figures[path.stem] = self.measured(path, lesson, time.perf_counter() - start, memory.peak)
        recorded = results.read(path.stem, RESULTS_REAL)
        assert recorded and recorded["floor"] == lesson.floor_for("real"), recorded
        held = not random_weights and not config.smoke()  # learnt from drawn content, at the course size: held to it
        assert recorded["enforced"] == held, recorded
        verdicts = checking.read(path.stem.split("_")[0], RESULTS_REAL)
        assert len(verdicts) == len(exercise_checks(path)), verdicts
        assert all(v["state"] == checking.NOT_DONE for v in verdicts.values()), verdicts
        found = sockets.problems() + problems(path, EXECUTED_REAL)
        assert not found, f"{path.name} on the real sources: " + "; ".join(found)
        if "beans" in lesson.sources:  # the data set came from the Hub, by its real id, through datasets' client
            assert any(BEANS_ID in request for request in self.hub.requests)

    def measured(self, path: Path, lesson, seconds: float, peak: int) -> dict[str, str]:
        from course import results

        disk = folder_bytes(self.storage)
        recorded = results.read(path.stem, RESULTS_REAL)
        return {
            "time": f"{seconds:.0f} s" + over(seconds, TARGET_SECONDS, f"{TARGET_SECONDS} s"),
            "headline": f"{recorded.get('value', float('nan')):.3f} (real floor {lesson.floor_for('real')})",
            "peak memory": f"{peak / 1e9:.1f} GB" + over(peak, TARGET_PEAK_GB * 1e9, f"{TARGET_PEAK_GB} GB"),
            "checkpoints so far": f"{disk / 1e9:.2f} GB" + over(disk, TARGET_DISK_GB * 1e9, f"{TARGET_DISK_GB} GB"),
        }


REHEARSAL = Rehearsal()


def pytest_sessionstart(session: pytest.Session) -> None:
    """A fresh copy of every lesson's notebook in :data:`EXECUTED_REAL`, where `make test` asks nbmake to run them."""
    if not session.config.getoption("nbmake", False):
        return
    asked = [Path(arg.split("::")[0]).resolve() for arg in session.config.args]
    if not any(path == EXECUTED_REAL or EXECUTED_REAL in path.parents for path in asked):
        return
    from executed import NOTEBOOKS

    shutil.rmtree(EXECUTED_REAL, ignore_errors=True)
    EXECUTED_REAL.mkdir(parents=True)
    for notebook in NOTEBOOKS:
        shutil.copyfile(notebook, EXECUTED_REAL / notebook.name)
    REHEARSAL.build_in_the_background()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The rehearsed notebooks are notebooks (``-m notebook`` selects them, ``-m "not notebook"`` leaves them out)."""
    for item in items:
        if is_rehearsed(item):
            item.add_marker(pytest.mark.notebook)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where the session reads every lesson's sources (tests/cluster/test_real_sources.py, which reads the smoke
    size's content), the content is built while the tests before it run (after ``-m`` and ``-k`` chose them)."""
    if REHEARSAL.building is not None or not any(item.path.name == READS_TEST for item in session.items):
        return
    from real_sources import CONTENT_VERSION

    stamp = SMOKE_CONTENT / "VERSION"
    if not (stamp.is_file() and stamp.read_text() == f"{CONTENT_VERSION} smoke"):
        REHEARSAL.build_in_the_background(smoke=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if is_rehearsed(item) and REHEARSAL.services is None:
        REHEARSAL.start()


@pytest.hookimpl(wrapper=True, trylast=True)  # inside pytest's capture: what the checks print stays with the test
def pytest_runtest_call(item: pytest.Item):
    if not is_rehearsed(item):
        return (yield)
    return (yield from REHEARSAL.run(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    if is_rehearsed(item) and (report.when == "call" or report.failed):
        REHEARSAL.outcomes[Path(str(item.path)).stem] = report.outcome
    return report


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if is_rehearsed(item) and (nextitem is None or not is_rehearsed(nextitem)):
        REHEARSAL.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A build no test waited for (the session stopped early) stops with it: unstamped content is built again."""
    if REHEARSAL.building is not None and REHEARSAL.building.poll() is None:
        REHEARSAL.building.terminate()
        REHEARSAL.building.wait()


def pytest_terminal_summary(terminalreporter) -> None:
    if REHEARSAL.figures:
        from course import config

        size = "the smoke size: figures of the code paths, not of a laptop" if config.smoke() else "the course size"
        terminalreporter.section(f"the real sources, rehearsed (drawn content, random weights; {size})")
        for name, figures in REHEARSAL.figures.items():
            terminalreporter.write_line(f"{name:<28} " + ", ".join(f"{k} {v}" for k, v in figures.items()))
        written = write_figures("smoke" if config.smoke() else "course")
        terminalreporter.write_line(f"(written to {written.relative_to(ROOT)}, the executed copies beside it)")


def write_figures(size: str) -> Path:
    """``results/rehearsal/figures-<size>.md``: each rehearsed notebook's outcome and figures beside the targets;
    its executed copy goes to ``results/rehearsal/executed-<size>/`` (the next size's run overwrites
    results/executed-real/)."""
    from datetime import datetime

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    columns = next(iter(REHEARSAL.figures.values())).keys()
    lines = [
        f"# The real sources, rehearsed at the {size} size",
        "",
        f"{datetime.now():%Y-%m-%d %H:%M}, commit {commit}, {os.cpu_count()} CPUs: drawn content "
        "and random weights on the stand-ins of the Hub and S3 (tests/support/real_sources_rehearsal.py). Targets on a "
        f"2-core laptop at the course size: {TARGET_SECONDS} s a notebook, {TARGET_PEAK_GB} GB at the peak, "
        f"{TARGET_DISK_GB} GB of checkpoints.",
        "",
        "| notebook | outcome | " + " | ".join(columns) + " |",
        "|---" * (len(columns) + 2) + "|",
    ]
    for name, figures in REHEARSAL.figures.items():
        outcome = REHEARSAL.outcomes.get(name, "not run")
        lines.append(f"| {name} | {outcome} | " + " | ".join(figures.values()) + " |")
    FIGURES.mkdir(parents=True, exist_ok=True)
    path = FIGURES / f"figures-{size}.md"
    path.write_text("\n".join(lines) + "\n")
    executed = FIGURES / f"executed-{size}"
    shutil.rmtree(executed, ignore_errors=True)
    executed.mkdir()
    for name in REHEARSAL.figures:
        if (EXECUTED_REAL / f"{name}.ipynb").is_file():
            shutil.copyfile(EXECUTED_REAL / f"{name}.ipynb", executed / f"{name}.ipynb")
    return path
