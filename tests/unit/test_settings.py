"""One place for settings: every ``COURSE_*`` variable is declared in course/settings.py, read through it wherever it
is read (Python, the Makefile, the shell scripts), and a wrong value is refused there with the fix."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from python_source import parse

from course import cluster, settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_PY = ROOT / "course" / "settings.py"
NAME = re.compile(r"\bCOURSE_[A-Z][A-Z0-9_]*\b")
# Where a name is only described, not read: the declarations themselves, the docs, this test.
DESCRIBED_ONLY = ("course/settings.py", "tests/unit/test_settings.py", "README.md", "docs/")


def repository_files() -> dict[str, str]:
    """Every file of the repository (committed, or new and not ignored) that is text, by its path."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    texts = {}
    for name in filter(None, listed):
        path = ROOT / name
        try:
            texts[name] = path.read_text()
        except (OSError, UnicodeDecodeError):  # a binary file, or one deleted in the working tree
            continue
    return texts


def test_every_course_variable_in_the_repository_is_declared_and_every_declared_one_is_read():
    found: dict[str, set[str]] = {}
    for name, text in repository_files().items():
        for variable in NAME.findall(text):
            found.setdefault(variable, set()).add(name)
    undeclared = {variable: sorted(where) for variable, where in found.items() if variable not in settings.BY_NAME}
    assert not undeclared, f"declare these in course/settings.py (meaning, default, allowed values): {undeclared}"
    unread = [
        s.name for s in settings.SETTINGS if not any(not p.startswith(DESCRIBED_ONLY) for p in found.get(s.name, ()))
    ]
    assert not unread, f"declared in course/settings.py and read nowhere: {unread}"


def test_settings_imports_only_the_standard_library_and_runs_on_a_bare_python():
    tree = parse(SETTINGS_PY.read_text())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    env = {"PATH": os.environ["PATH"], "COURSE_SOURCES": " Real "}
    # -I -S: no site-packages, no PYTHONPATH, no current folder: what a bare python3 has before `make setup`
    shown = subprocess.run(
        [sys.executable, "-I", "-S", str(SETTINGS_PY), "get", "COURSE_SOURCES"], capture_output=True, text=True, env=env
    )
    assert (shown.returncode, shown.stdout) == (0, "real\n"), shown.stderr


@pytest.mark.parametrize(
    ("name", "wrong", "allowed"),
    [
        ("COURSE_SOURCES", "hub", "['standin', 'real']"),
        ("COURSE_BUDGET", "laptop", "['cpu', 'gpu']"),
        ("COURSE_VERBOSE", "maybe", "1 or 0"),
        ("COURSE_FLOORS", "skip", "['enforce', 'report']"),
        ("COURSE_RAY_PORT", "70000", "a TCP port"),
        ("COURSE_RAY_CPUS_PER_NODE", "0", "at least 1"),
        ("COURSE_CELL_TIMEOUT", "ten", "a whole number"),
        ("COURSE_RAY_TRAIN_LOG_LEVEL", "loud", "a logging level"),
        ("COURSE_DEBIAN_MIRROR", "deb.debian.org", "a URL"),
    ],
)
def test_a_wrong_value_is_refused_with_the_variable_what_it_allows_and_the_fix(name, wrong, allowed):
    with pytest.raises(ValueError) as refused:
        settings.read(name, environ={name: wrong})
    message = str(refused.value)
    assert f"{name}={wrong!r}" in message and allowed in message and f"`export {name}=" in message, message
    assert "leave it unset" in message, message


def test_a_bucket_for_the_data_folder_is_refused_with_the_alternatives():
    with pytest.raises(ValueError, match="must be a folder every node mounts.*COURSE_STORAGE_PATH"):
        settings.read("COURSE_DATA_DIR", environ={"COURSE_DATA_DIR": "s3://bucket/data"})


def test_right_values_are_read_one_way_and_unset_ones_are_the_defaults():
    assert settings.read("COURSE_SOURCES", environ={"COURSE_SOURCES": " Real "}) == "real"
    assert settings.read("COURSE_SOURCES", environ={"COURSE_SOURCES": ""}) == "standin"
    assert settings.read("COURSE_SOURCES", "standin", environ={"COURSE_SOURCES": "real"}) == "standin"  # given wins
    assert settings.flag("COURSE_VERBOSE", environ={"COURSE_VERBOSE": "Yes"})
    assert not settings.flag("COURSE_VERBOSE", environ={})
    assert settings.number("COURSE_RAY_PORT", environ={}) == 6389
    assert settings.number("COURSE_SERVE_PORT", environ={}) is None
    assert settings.read("COURSE_BUDGET", environ={}) == ""  # unset: the hardware decides (config.budget_kind)
    with pytest.raises(KeyError, match="declare it in course/settings.py"):
        settings.read("COURSE_" + "NOT_DECLARED")


def run_settings(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-S", str(SETTINGS_PY), *args], capture_output=True, text=True, env={"PATH": "/bin", **env}
    )


def test_the_command_line_prints_the_value_export_lines_and_the_table_and_exits_2_on_a_wrong_value():
    assert run_settings("get", "COURSE_SOURCES= REAL ").stdout == "real\n"
    refused = run_settings("get", "COURSE_BUDGET", COURSE_BUDGET="laptop")
    assert refused.returncode == 2 and "COURSE_BUDGET='laptop'" in refused.stderr and not refused.stdout
    assert run_settings("get", "COURSE_" + "NOT_DECLARED").returncode == 2
    lines = run_settings("shell", "COURSE_RAY_PORT", "COURSE_RAY_ISOLATED_NODE", COURSE_RAY_ISOLATED_NODE="yes").stdout
    assert lines == "export COURSE_RAY_PORT=6389\nexport COURSE_RAY_ISOLATED_NODE=1\n"
    script = f'eval "$({sys.executable} -S {SETTINGS_PY} shell COURSE_MINIMAL_ROOT)"; echo "$COURSE_MINIMAL_ROOT"'
    evaluated = subprocess.run(
        ["bash", "-c", script],
        capture_output=True, text=True, env={"PATH": os.environ["PATH"], "COURSE_MINIMAL_ROOT": "/tmp/a root's folder"},
    ).stdout  # fmt: skip
    assert evaluated == "/tmp/a root's folder\n"
    table = run_settings("table").stdout
    assert all(f"| `{s.name}` |" in table for s in settings.SETTINGS)


def test_the_docs_show_the_modules_table():
    docs = (ROOT / "docs" / "development.md").read_text()
    assert settings.table() in docs, "docs/development.md's settings table is old: `python3 course/settings.py table`"


def fresh_env(**more: str) -> dict[str, str]:
    """This environment as a fresh shell has it: no course or library settings, no make of an outer run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "COURSE_", "MAKE", "TRANSFORMERS_"))}
    return env | more


def make_sources(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "-s", "-C", str(ROOT), "sources", *args], capture_output=True, text=True, env=fresh_env(**env)
    )


def test_the_makefile_refuses_a_wrong_value_with_the_fix_before_it_runs_anything():
    result = make_sources("COURSE_SOURCES=bogus")
    assert result.returncode != 0 and not result.stdout, result.stdout
    assert "COURSE_SOURCES='bogus'" in result.stderr and "`export COURSE_SOURCES=standin`" in result.stderr
    result = make_sources(COURSE_VERBOSE="maybe")
    assert result.returncode != 0 and "COURSE_VERBOSE='maybe' is not a flag" in result.stderr, result.stderr


def test_the_cluster_script_refuses_a_wrong_value_with_the_fix():
    result = subprocess.run(
        [str(ROOT / "scripts" / "with-ray-cluster.sh"), "stop"],
        capture_output=True, text=True, env=fresh_env(COURSE_RAY_PORT="63 89"),
    )  # fmt: skip
    assert result.returncode == 2 and "COURSE_RAY_PORT='63 89' is not a port" in result.stderr, result.stderr


@pytest.mark.parametrize("verbose", ["", "1"])
def test_the_makefile_and_the_workers_are_quiet_the_same_way(tmp_path, verbose):
    assert settings.QUIET_LIBRARIES.items() <= cluster.QUIET_WORKERS.items()
    probe = tmp_path / "probe.mk"
    probe.write_text(f"include {ROOT / 'Makefile'}\nprobe:\n\t@env\n")
    shown = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "-f", str(probe), "probe", f"COURSE_VERBOSE={verbose}"],
        capture_output=True, text=True, env=fresh_env(),
    ).stdout  # fmt: skip
    exported = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    quiet = {name: exported.get(name) for name in settings.QUIET_LIBRARIES}
    assert quiet == ({name: None for name in quiet} if verbose else settings.QUIET_LIBRARIES), quiet


def test_a_lesson_opened_outside_make_is_quiet_too_where_transformers_came_first():
    """A lesson's first cell imports transformers before `init_ray()` sets the quiet variables (a Jupyter started
    without `make lab`, or Colab): they are told then, so that an exercise check's model load prints no report and a
    download no progress bar."""
    probe = (
        "import logging, datasets, huggingface_hub.utils, transformers\n"
        "from course.cluster import prepare_this_process\n"
        "prepare_this_process()\n"
        "print(transformers.logging.get_verbosity() == logging.ERROR,"
        " huggingface_hub.utils.are_progress_bars_disabled(), not datasets.is_progress_bar_enabled())\n"
    )
    env = {name: value for name, value in fresh_env().items() if name not in settings.QUIET_LIBRARIES}
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT)
    assert shown.stdout.strip() == "True True True", shown.stderr
