"""Every ``COURSE_*`` variable the course reads, declared once: its meaning, its default, its allowed values. A value
is checked where it is read (:func:`read`), and a wrong one is refused with a message that names the variable, what
it allows and the fix. The Makefile and the shell scripts read the same declarations through this file's command
line; it imports only the standard library, so a bare ``python3`` runs it before ``make setup``::

    python3 course/settings.py get COURSE_SOURCES           # the value, checked (a wrong one: the fix, exit 2)
    python3 course/settings.py get COURSE_SOURCES=' Real '  # a value given here instead of the environment's: real
    python3 course/settings.py shell COURSE_RAY_PORT ...    # `export NAME=value` lines, checked, for a script to eval
    python3 course/settings.py quiet                        # the quiet libraries' NAME=value, for the Makefile
    python3 course/settings.py table                        # every setting, a markdown table (docs/development.md)

An empty value is an unset one: the default applies. Paths and a few more are given as they are; the words
(``standin``, ``cpu``, ``report``...) are read without case or surrounding spaces; flags take ``1``/``0`` (or
true/false, yes/no, on/off) and read as ``1``/``0``.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Short library steps (loading weights, resolving data files) show no progress bar: in a notebook each would be a
# widget, and a widget breaks once the notebook is saved and reopened. Transformers' load report (the new head's
# weights are new: the lesson says so) stays out too. Unless COURSE_VERBOSE=1: the Makefile exports them for every
# command, course.cluster for the notebook's process and every Ray worker.
QUIET_LIBRARIES = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}


@dataclass(frozen=True)
class Setting:
    """One ``COURSE_*`` variable. ``kind`` says what it allows: ``choice`` (one of ``choices``), ``flag`` (1 or 0),
    ``integer`` (at least ``minimum``), ``port``, ``level`` (a logging level), ``url``, ``path``, ``tracking`` (an
    MLflow tracking URI) or ``text``."""

    name: str
    meaning: str
    kind: str = "text"
    default: str = ""  # the value when unset or empty ("": none; ``unset`` says what happens then)
    unset: str = ""  # what an unset one means, in words, where that is not ``default`` itself
    choices: tuple[str, ...] = ()
    minimum: int = 0
    example: str = ""  # a right value, shown in the fix
    set_by: str = "you"  # who sets it: you, an instructor, the cluster script, the course itself, the tests
    rule: Callable[[str], str | None] | None = None  # one more check: what is wrong with a value, or None

    def allowed(self) -> str:
        """What the setting allows, in words."""
        if self.kind == "choice":
            return f"one of {list(self.choices)}"
        return {
            "flag": "1 or 0 (true/false, yes/no, on/off)",
            "integer": f"a whole number, at least {self.minimum}",
            "port": "a TCP port, 1 to 65535",
            "level": f"a logging level, one of {list(LEVELS)}",
            "url": "a URL (http://, https:// or file://)",
            "path": "a path",
            "tracking": "an MLflow tracking URI (http://host:port, https://..., sqlite:///path, file:///path)",
        }.get(self.kind, "any text")

    def when_unset(self) -> str:
        """What an unset setting means."""
        return self.unset or self.default or "nothing"

    def parse(self, value: str) -> str:
        """``value`` (not empty) checked and written the one way the course reads it; a wrong one is a ValueError."""
        text = value.strip()
        problem = None
        if self.kind == "choice":
            text = text.lower()
            problem = None if text in self.choices else "is not a known setting"
        elif self.kind == "flag":
            text = {**{v: "1" for v in TRUE}, **{v: "0" for v in FALSE}}.get(text.lower(), text)
            problem = None if text in ("1", "0") else "is not a flag"
        elif self.kind in ("integer", "port"):
            low, high = (1, 65535) if self.kind == "port" else (self.minimum, None)
            if not re.fullmatch(r"[+-]?\d+", text) or int(text) < low or (high is not None and int(text) > high):
                problem = "is not " + ("a port" if self.kind == "port" else f"a whole number of at least {low}")
            else:
                text = str(int(text))
        elif self.kind == "level":
            text = text.upper()
            problem = None if text in LEVELS else "is not a logging level"
        elif self.kind == "url":
            problem = None if re.match(r"(https?|file)://.", text) else "is not a URL"
        if problem is None and self.rule is not None:
            problem = self.rule(text)
        if problem is not None:
            raise ValueError(self.refusal(value, problem))
        return text

    def refusal(self, value: str, problem: str) -> str:
        """The message for a wrong ``value``: the variable, what is wrong, what it allows, and the fix."""
        example = self.example or self.default or (self.choices[0] if self.choices else "")
        return (
            f"{self.name}={value!r} {problem}: use {self.allowed()} "
            f"(for example `export {self.name}={example}`), or leave it unset (then: {self.when_unset()}). "
            f"{self.name}: {self.meaning}"
        )


def _not_a_uri(text: str) -> str | None:
    if "://" in text:
        return (
            "is a URI: it must be a folder every node mounts (an NFS mount such as "
            "/mnt/cluster_storage/vit-ray-course/data). Buckets work for COURSE_STORAGE_PATH (checkpoints and "
            "outputs), and COURSE_SOURCES=real reads the public data sets from S3 itself"
        )
    return None


TRACKING_SCHEMES = ("http://", "https://", "sqlite:///", "file://", "databricks")


def _not_a_tracking_uri(text: str) -> str | None:
    if not text.startswith(TRACKING_SCHEMES):
        return "is not an MLflow tracking URI"
    return None


SETTINGS = (
    # What a learner or an instructor chooses.
    Setting(
        "COURSE_SOURCES",
        "where the data sets and the pretrained model come from: the offline stand-ins `make data` builds, or the "
        "real ones (the Hugging Face Hub and S3, network needed; the Makefile then leaves the Hub online)",
        "choice",
        default="standin",
        choices=("standin", "real"),
    ),
    Setting(
        "COURSE_BUDGET",
        "how much work the notebooks do: a laptop's (cpu) or a GPU cluster's (gpu)",
        "choice",
        unset="gpu when the cluster has GPUs, else cpu",
        choices=("cpu", "gpu"),
    ),
    Setting(
        "COURSE_MODEL",
        "the pretrained image classifier lessons 01 to 03 fine-tune, instead of the sources' own: a Hub id, or a "
        "`save_pretrained` folder written as a path (/..., ./... or ~/...)",
        unset="the sources' model (the stand-in, or course.sources.REAL_MODELS by budget)",
        example="google/vit-base-patch16-224",
    ),
    Setting(
        "COURSE_VERBOSE",
        "keep the info lines of Ray, Ray Train, TensorFlow and the Hugging Face libraries, and their progress bars",
        "flag",
        default="0",
        example="1",
    ),
    Setting(
        "COURSE_DATA_DIR",
        "the folder of the course's data sets; on a cluster, one every node mounts (`make data` builds or "
        "publishes there)",
        "path",
        unset="data/ in the checkout",
        example="/mnt/cluster_storage/vit-ray-course/data",
        set_by="you (the cluster script, for its isolated node)",
        rule=_not_a_uri,
    ),
    Setting(
        "COURSE_STORAGE_PATH",
        "where Ray's workers write checkpoints and outputs: a folder every node reaches, or a bucket (s3://...)",
        "path",
        unset="results/ray under COURSE_RESULTS_DIR",
        example="s3://my-bucket/vit-ray-course",
        set_by="you (the cluster script, for its isolated node)",
    ),
    Setting(
        "COURSE_RESULTS_DIR",
        "where this process writes what you read: executed notebooks, headline figures, exercise verdicts",
        "path",
        unset="results/ in the checkout",
        example="/tmp/course-results",
    ),
    Setting(
        "COURSE_TRACKING_URI",
        "where the training lessons log their MLflow runs: a tracking server every Ray worker reaches (http://...), "
        "or a store on this machine (sqlite:///...); MLFLOW_TRACKING_URI, when set, wins over it",
        "tracking",
        unset="sqlite:///<COURSE_RESULTS_DIR>/mlflow/mlflow.db, a store that needs no server (course.tracking)",
        example="http://127.0.0.1:5000",
        set_by="you (the cluster script: the tracking server it starts on 127.0.0.1)",
        rule=_not_a_tracking_uri,
    ),
    Setting(
        "COURSE_SERVE_PORT",
        "the port notebook 06's service takes on 127.0.0.1",
        "port",
        unset="a free port, chosen at run time",
        example="8000",
    ),
    Setting(
        "COURSE_FLOORS",
        "whether a notebook's headline must reach its floor (enforce), or is only printed beside it (report: a run "
        "whose content cannot learn, such as the real-sources rehearsal's random weights)",
        "choice",
        default="enforce",
        choices=("enforce", "report"),
    ),
    Setting(
        "COURSE_SMOKE",
        "run every notebook at the smoke size: each code path of the course size (devices, checkpoints, restarts, "
        "actor pools, deployments, trials) at its smallest, in minutes; headlines are printed beside their floors, "
        "not held to them",
        "flag",
        "0",
        example="1",
    ),
    Setting(
        "COURSE_TEST_SIZE",
        "the size `make test` executes the notebooks at: smoke (every code path, in minutes; every landing) or course "
        "(what learners see: headlines held to their floors, each lesson's claims checked; the weekly workflow)",
        "choice",
        default="smoke",
        choices=("smoke", "course"),
    ),
    Setting(
        "COURSE_PACKAGE",
        "where a lesson opened on its own (Colab, a Jupyter without the course) installs the course from, in its "
        "first cell (course.links): a checkout's path, a git URL, or a version pip can install",
        unset="the repository URL pyproject.toml declares ([project.urls] Repository); none declared: the cell asks",
        example="git+https://github.com/you/vit-ray-course",
    ),
    # The local Ray cluster (scripts/with-ray-cluster.sh).
    Setting("COURSE_RAY_PORT", "the local cluster's port on 127.0.0.1 (it takes the next one too)", "port", "6389"),
    Setting("COURSE_RAY_CPUS_PER_NODE", "logical CPUs of each node of the local cluster", "integer", "4", minimum=1),
    Setting(
        "COURSE_RAY_WORKER_GPUS",
        "GPUs the local cluster's worker node reports (tests: a node that claims a GPU torch cannot see)",
        "integer",
        "0",
    ),
    Setting(
        "COURSE_RAY_ISOLATED_NODE",
        "start the local cluster's worker node in a mount namespace that shares no files with the checkout, as a "
        "real cluster's node (needs root); `make test` sets it",
        "flag",
        "0",
        example="1",
    ),
    Setting(
        "COURSE_RAY_ISOLATED_NODE_UP",
        "whether the local cluster's isolated worker node did start (the tests read it)",
        "flag",
        unset="no cluster script around: no isolated node",
        example="1",
        set_by="the cluster script",
    ),
    Setting(
        "COURSE_RAY_TEMP_DIR",
        "the local cluster's temp folder: every process of the cluster names it (the tests' socket watch finds them)",
        "path",
        unset="no local cluster",
        example="/tmp/ray-course-0-123",
        set_by="the cluster script",
    ),
    # What the course sets for its own processes.
    Setting(
        "COURSE_RAY_TRAIN_LOG_LEVEL",
        "the level of the `ray.train` loggers in every Ray worker (WARNING keeps Ray Train's info lines out)",
        "level",
        unset="Ray Train's own",
        example="WARNING",
        set_by="the course (the job's env, unless COURSE_VERBOSE=1)",
    ),
    Setting(
        "COURSE_LOOPBACK_ONLY",
        "the job runs on this machine: the servers its workers start listen on 127.0.0.1 only",
        "flag",
        "0",
        example="1",
        set_by="the course (the job's env, on this machine)",
    ),
    Setting(
        "COURSE_CELL_TIMEOUT",
        "seconds one notebook cell may run under `make run` (the tests give a cell 900 s, a solution's cell 600 s)",
        "integer",
        "1800",
        minimum=1,
    ),
    # `make minimal-linux` (scripts/minimal-linux.sh).
    Setting(
        "COURSE_MINIMAL_ROOT",
        "the folder of `make minimal-linux`'s Debian minbase root",
        "path",
        "/var/tmp/course-minbase",
    ),
    Setting(
        "COURSE_DEBIAN_MIRROR",
        "the Debian archive `make minimal-linux` builds its root from",
        "url",
        "http://deb.debian.org/debian",
    ),
    Setting(
        "COURSE_MINIMAL_PYTHON",
        "the Python `make minimal-linux` gives its root: a CPython 3.11.5 to 3.13 built on this machine",
        "path",
        unset="the one .venv was made with, else the newest pyenv CPython 3.11 to 3.13",
        example="/usr/local/bin/python3.13",
    ),
)
BY_NAME = {setting.name: setting for setting in SETTINGS}


def declared(name: str) -> Setting:
    """The declaration of ``name``; a name that is not declared here is an error (a typo, or one to declare)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name} is not a setting of the course: declare it in course/settings.py") from None


def read(name: str, value: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The setting ``name``, checked and written the one way the course reads it: ``value`` if given (not empty), else
    the environment's, else its default (``""`` for none). A wrong value is a ValueError that names the fix."""
    setting = declared(name)
    given = value if value else (os.environ if environ is None else environ).get(name, "")
    return setting.parse(given) if given.strip() else setting.default


def flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """A flag setting, on or off."""
    return read(name, environ=environ) == "1"


def number(name: str, environ: Mapping[str, str] | None = None) -> int | None:
    """A whole-number setting (a port, a count), or None where it is unset and has no default."""
    text = read(name, environ=environ)
    return int(text) if text else None


def raw(name: str) -> str:
    """The environment's value of ``name`` as it is, unchecked (a path that is checked where it is used)."""
    return os.environ.get(declared(name).name, "").strip()


def table() -> str:
    """Every setting as a markdown table: name, meaning, allowed values, unset, set by."""
    rows = ["| setting | meaning | allowed | unset | set by |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        cells = (f"`{s.name}`", s.meaning, s.allowed(), s.when_unset(), s.set_by)
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


USAGE = "usage: settings.py get NAME[=VALUE] | shell NAME... | quiet | table"


def main(argv: list) -> int:
    """The command line (see the module's docstring). A wrong value: its message on stderr, exit status 2."""
    command, names = (argv[0], argv[1:]) if argv else ("", [])
    try:
        if command == "get" and len(names) == 1:
            name, given, value = names[0].partition("=")
            print(read(name, environ={name: value}) if given else read(name))
        elif command == "shell" and names:
            lines = [f"export {name}={shlex.quote(read(name))}" for name in names]
            print("\n".join(lines))
        elif command == "quiet" and not names:
            print("\n".join(f"{name}={value}" for name, value in QUIET_LIBRARIES.items()))
        elif command == "table" and not names:
            print(table())
        else:
            print(USAGE, file=sys.stderr)
            return 2
    except (KeyError, ValueError) as error:
        print(error.args[0], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
