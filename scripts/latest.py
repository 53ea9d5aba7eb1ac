"""`make latest`: the course's tests against the newest releases of its packages, without touching the lock.

What breaks a course repository most often is a new release of Ray (about monthly), torch, transformers or datasets.
This resolves every package afresh (`uv pip compile --upgrade`, for this machine only) into a venv of its own,
`.venv-latest/`, installs the course there, prints each direct dependency's locked and newest version, and runs the
tests in that venv (`make test VENV=.venv-latest`; `LATEST_TESTS=check` for the fast loop only). A pass says the lock
can move (`make lock UPGRADE=1`); a failure names the tests that broke, under the table of what moved. The report
is written to results/latest/ (CI keeps it as an artifact: .github/workflows/course.yml).

torch (`LATEST_TORCH`):
* ``auto`` (default): the newest torch where it comes without CUDA libraries or where CUDA is wanted: on Linux without
  an NVIDIA GPU from PyTorch's CPU index, on macOS and on a GPU machine from PyPI. Where the CPU index cannot be
  reached (a closed network), torch stays at the lock's version, and the table says so: PyPI's Linux build of a newer
  torch is a CUDA build of several GB.
* ``newest``: the newest torch from PyPI whatever it costs; ``locked``: the lock's torch, always.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
OVERRIDES = ROOT / "requirements" / "overrides.txt"
VENV = ROOT / ".venv-latest"
OUT = ROOT / "results" / "latest"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
WATCHED = ("ray", "torch", "transformers", "datasets", "accelerate", "evaluate", "pyarrow", "numpy", "pandas")
TORCH_CHOICES = ("auto", "newest", "locked")
TESTS_CHOICES = ("test", "check")


def setting(name: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, choices[0]).strip().lower()
    if value not in choices:
        sys.exit(f"{name}={value!r}: use one of {', '.join(choices)} (default {choices[0]})")
    return value


def run(command: list[str], **options) -> subprocess.CompletedProcess:
    print("+", " ".join(str(part) for part in command), flush=True)
    return subprocess.run(command, cwd=ROOT, **options)


def reachable(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=5)
        return True
    except OSError:
        return False


def torch_source(choice: str) -> tuple[str, str]:
    """(how torch is installed: "pypi", "cpu-index" or "locked"; why)."""
    if choice == "locked":
        return "locked", "LATEST_TORCH=locked"
    if choice == "newest":
        return "pypi", "LATEST_TORCH=newest: PyPI's build (CUDA on Linux)"
    if platform.system() != "Linux" or shutil.which("nvidia-smi"):
        return "pypi", "PyPI's build is the one this machine wants (macOS, or a GPU)"
    if reachable(f"{CPU_INDEX}/torch/"):
        return "cpu-index", "the CPU build, from PyTorch's CPU index"
    return "locked", f"{CPU_INDEX} cannot be reached and PyPI's newer torch is a CUDA build of several GB"


def direct_dependencies() -> list[str]:
    """The names in pyproject.toml's dependencies and its extras (what `make setup` installs), in order, once each."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for extra in project["optional-dependencies"].values() for r in extra]
    names = [Requirement(r).name.lower() for r in [*project["dependencies"], *extras]]
    return list(dict.fromkeys(names))


def versions(requirements: str) -> dict[str, str]:
    """name -> version of a pip-compile output; where a name has several lines (markers), the first that applies here
    is taken by pip, and this takes the first too."""
    found: dict[str, str] = {}
    for line in requirements.splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)", line)
        if match:
            found.setdefault(match.group(1).lower().replace("_", "-"), match.group(2))
    return found


def installed_versions(python: Path) -> dict[str, str]:
    listed = subprocess.run(
        [str(python), "-m", "uv", "pip", "list", "--python", str(python), "--format", "freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return versions(listed)


def table(locked: dict[str, str], newest: dict[str, str], names: list[str], torch_note: str) -> str:
    rows = ["| package | locked | newest here | |", "|---|---|---|---|"]
    for name in [*WATCHED, *(n for n in names if n not in WATCHED)]:
        key = name.replace("_", "-")
        old, new = locked.get(key, "-"), newest.get(key, "-")
        note = "moved" if old != new.split("+")[0] and new != "-" else ""  # 2.13.0+cpu is the lock's 2.13.0
        if key == "torch":
            note = f"{note}; {torch_note}".strip("; ")
        rows.append(f"| {name} | {old} | {new} | {note} |")
    return "\n".join(rows)


def main() -> int:
    torch_choice = setting("LATEST_TORCH", TORCH_CHOICES)
    tests = setting("LATEST_TESTS", TESTS_CHOICES)
    OUT.mkdir(parents=True, exist_ok=True)
    base = Path(sys._base_executable if hasattr(sys, "_base_executable") else sys.executable)
    if not (VENV / "bin" / "python").exists():
        run([str(base), "-m", "venv", str(VENV)], check=True)
    python = VENV / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "uv"], check=True)
    how, why = torch_source(torch_choice)
    overrides = OUT / "overrides.txt"
    pinned = OVERRIDES.read_text()
    if how != "locked":  # lifts the torch pin: uv applies every override of a package, so the pin's line goes
        pinned = "\n".join(line for line in pinned.splitlines() if not line.replace(" ", "").startswith("torch=="))
    overrides.write_text(pinned + "\n")
    resolved = OUT / "resolved.txt"
    compile_command = [str(python), "-m", "uv", "pip", "compile", "pyproject.toml", "--all-extras", "--upgrade"]
    compile_command += ["--python", str(python), "--override", str(overrides), "--quiet", "-o", str(resolved)]
    if how == "cpu-index":
        compile_command += ["--index-url", CPU_INDEX, "--extra-index-url", "https://pypi.org/simple"]
        compile_command += ["--index-strategy", "unsafe-best-match"]
    if run(compile_command).returncode:
        print("the newest releases do not resolve together: read uv's message above", file=sys.stderr)
        return 1
    install = [str(python), "-m", "uv", "pip", "install", "--python", str(python), "--compile-bytecode", "--quiet"]
    install += ["--override", str(overrides)]  # as `make setup` installs: what overrides.txt removes stays out
    if how == "cpu-index":
        install += ["--index-url", CPU_INDEX, "--extra-index-url", "https://pypi.org/simple"]
        install += ["--index-strategy", "unsafe-best-match"]
    if how == "locked":  # the lock's torch as `make setup` installs it (its CPU build where that index is reachable)
        run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "torch==" + versions(LOCK.read_text())["torch"],
            ]
        )
    run([*install, "-r", str(resolved)], check=True)
    run([*install, "--no-deps", "-e", "."], check=True)
    (VENV / ".course-installed").touch()  # `make ... VENV=.venv-latest` takes it as set up: no locked install over it

    locked, newest = versions(LOCK.read_text()), installed_versions(python)
    report = [
        "# make latest",
        "",
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}; torch: {why}.",
        "",
        table(locked, newest, direct_dependencies(), why),
        "",
    ]
    print("\n".join(report), flush=True)
    result = run(["make", "--no-print-directory", tests, f"VENV={VENV}"], capture_output=True, text=True)
    output = result.stdout + result.stderr
    (OUT / "tests.log").write_text(output)
    print(output[-6000:])
    failed = [line for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))]
    summary = next((line for line in reversed(output.splitlines()) if " passed" in line or " failed" in line), "")
    said = summary.strip("= ") or "see tests.log"
    if result.returncode == 0:
        verdict = f"`make {tests}` passed on the newest releases ({said}): the lock can move (`make lock UPGRADE=1`)."
    else:
        verdict = f"`make {tests}` failed on the newest releases ({said}):"
    report += [verdict, "", *[f"- {line}" for line in failed[:40]]]
    (OUT / "report.md").write_text("\n".join(report) + "\n")
    print("\n".join(report[-(len(failed[:40]) + 2) :]))
    print(f"\nthe report: {OUT / 'report.md'}; the tests' output: {OUT / 'tests.log'}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
