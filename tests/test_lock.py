"""The one lock installs on every supported platform, and `make setup` refuses a Python it cannot serve.

The platform check is a binary-only dry run against the package index, once per platform, with uv's
`pip install --dry-run --python-platform`: uv evaluates the lock's environment markers for the target
platform (pip evaluates them for the machine it runs on), and with `--no-deps` it reads only the
index pages, never a package file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
PYPROJECT = ROOT / "pyproject.toml"
sys.path.insert(0, str(ROOT / "scripts"))
import check_python  # noqa: E402  (scripts/ is not a package)

LOWEST, TOO_NEW = check_python.required_range(PYPROJECT.read_text())
PYTHON = ".".join(map(str, LOWEST))  # the oldest Python the project allows must install everything

# The supported platforms: uv's name for each, and the marker values of such a machine.
PLATFORMS = {
    "linux-x86_64": ("x86_64-manylinux_2_28", {"sys_platform": "linux", "platform_machine": "x86_64"}),
    "linux-aarch64": ("aarch64-manylinux_2_28", {"sys_platform": "linux", "platform_machine": "aarch64"}),
    "macos-arm64": ("aarch64-apple-darwin", {"sys_platform": "darwin", "platform_machine": "arm64"}),
}
MACOS = "14.0"  # the oldest macOS the course supports (torch 2.13.0's wheels need 14)


def marker_environment(platform: str) -> dict[str, str]:
    """The values environment markers see on ``platform`` with the lowest allowed Python."""
    _, values = PLATFORMS[platform]
    system = {"linux": "Linux", "darwin": "Darwin"}[values["sys_platform"]]
    return {
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
        "platform_system": system,
        "platform_release": "",
        "platform_version": "",
        "python_version": ".".join(PYTHON.split(".")[:2]),
        "python_full_version": PYTHON,
        "implementation_version": PYTHON,
        "extra": "",
        **values,
    }


def locked(platform: str) -> list[str]:
    """The ``name==version`` pins of the lock that apply on ``platform``."""
    environment = marker_environment(platform)
    pins = []
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            pins.append(f"{requirement.name}{requirement.specifier}")
    return pins


def test_lock_pins_every_package_exactly_and_keeps_torch():
    pins = locked("linux-x86_64")
    assert all("==" in pin for pin in pins)
    assert "torch==2.13.0" in pins


@pytest.mark.parametrize(
    "platform, present, absent",
    [
        ("linux-x86_64", {"xgboost-cpu", "tensorflow-cpu"}, {"xgboost", "tensorflow"}),
        ("linux-aarch64", {"xgboost", "tensorflow"}, {"xgboost-cpu", "tensorflow-cpu"}),
        ("macos-arm64", {"xgboost", "tensorflow"}, {"xgboost-cpu", "tensorflow-cpu"}),
    ],
)
def test_platform_specific_packages_follow_the_markers(platform, present, absent):
    names = {pin.split("==")[0] for pin in locked(platform)}
    assert present <= names and not absent & names
    if platform == "macos-arm64":
        assert not {name for name in names if name.startswith(("nvidia-", "cuda-"))}, "no CUDA packages on a Mac"


def dry_run(platform: str, lock: Path, target: Path) -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "uv", "pip", "install", "--dry-run", "--no-deps", "--only-binary", ":all:",
        "--python-platform", PLATFORMS[platform][0], "--python-version", PYTHON, "--target", str(target),
        "--no-cache", "--quiet", "-r", str(lock),
    ]  # fmt: skip
    env = {**os.environ, "MACOSX_DEPLOYMENT_TARGET": MACOS}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.network
@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_every_locked_package_has_a_wheel_for_the_platform(platform, tmp_path):
    """Fails naming each package (up to five) that has no wheel for the platform."""
    lock, missing = tmp_path / "lock.txt", []
    lines = LOCK.read_text().splitlines()
    for _ in range(5):
        lock.write_text("\n".join(lines) + "\n")
        result = dry_run(platform, lock, tmp_path / "target")
        if result.returncode == 0:
            break
        found = re.search(r"Because (\S+)==(\S+) has no wheels with a matching platform tag", result.stderr)
        assert found, f"the dry run for {platform} failed:\n{result.stderr[-2000:]}"
        missing.append(f"{found.group(1)}=={found.group(2)}")
        lines = [line for line in lines if not line.startswith(f"{found.group(1)}==")]
    assert not missing, (
        f"no wheel for {platform} (Python {PYTHON}) of: {', '.join(missing)}. Give these packages an "
        "environment marker in pyproject.toml (as xgboost-cpu has) and run `make lock`."
    )


@pytest.mark.network
def test_the_dry_run_names_a_package_without_a_wheel(tmp_path):
    """The check itself can fail: tensorflow-cpu has no macOS wheel."""
    lock = tmp_path / "lock.txt"
    lock.write_text("tensorflow-cpu==2.21.0\n")
    result = dry_run("macos-arm64", lock, tmp_path / "target")
    assert (
        result.returncode != 0 and "tensorflow-cpu==2.21.0 has no wheels with a matching platform tag" in result.stderr
    )


# --- the interpreter check that `make setup` runs first -------------------------------------------


@pytest.mark.parametrize("version", [(3, 11, 2), (3, 12, 3), (3, 13, 0), (3, 10, 14)])
def test_a_python_the_lock_cannot_serve_gets_the_version_and_three_ways(version):
    message = check_python.advice(version, LOWEST, TOO_NEW)
    assert message and f"is Python {'.'.join(map(str, version))}" in message
    assert "3.11.5 or newer" in message
    for way in ("conda env create -f environment.yml", "uv python install 3.11", "pyenv install 3.11"):
        assert way in message


def test_the_pythons_the_lock_serves_pass():
    assert check_python.advice((3, 11, 5), LOWEST, TOO_NEW) is None
    assert check_python.advice(sys.version_info, LOWEST, TOO_NEW) is None


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs Debian's own python3")
def test_make_setup_stops_before_pip_with_an_old_python(tmp_path):
    """Debian 12's python3 is 3.11.2: `make setup` must say so, and create nothing."""
    version = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:3])"], capture_output=True)
    if b"(3, 11, 5)" <= version.stdout < b"(3, 12, 0)":
        pytest.skip("this machine's /usr/bin/python3 is one the course supports")
    venv = tmp_path / "env"
    result = subprocess.run(
        ["make", "-C", str(ROOT), "setup", "PYTHON=/usr/bin/python3", f"VENV={venv}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "This course needs Python 3.11" in result.stderr and "pyenv install" in result.stderr
    assert not venv.exists(), "nothing may be installed with a Python that cannot serve"


def test_environment_yml_brings_the_python_and_leaves_the_install_to_make_setup():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    python = next(d for d in environment["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert python == f"python>={PYTHON},<{'.'.join(map(str, TOO_NEW))}", (
        "environment.yml must allow what pyproject does"
    )
    assert not any(isinstance(d, dict) for d in environment["dependencies"]), (
        "environment.yml installs no packages with pip: `make setup VENV=$CONDA_PREFIX` installs the lock "
        "with its overrides, as for the .venv route"
    )
    assert "make setup VENV=$CONDA_PREFIX" in (ROOT / "environment.yml").read_text()


def test_overrides_keep_their_packages_out_of_the_environment():
    """What requirements/overrides.txt removes is neither installable from the lock nor installed."""
    removed = [
        Requirement(line).name
        for line in (ROOT / "requirements" / "overrides.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#") and "'never'" in line
    ]
    assert removed, "overrides.txt removes rfc3987-syntax (2.3 s of CPU in every Ray process)"
    for platform in PLATFORMS:
        pins = {pin.split("==")[0] for pin in locked(platform)}
        assert not pins & set(removed), f"the lock installs {pins & set(removed)} on {platform}"
    installed = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "list", "--python", sys.executable, "--format", "freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.lower()
    for name in removed:
        assert f"{name}==" not in installed, (
            f"{name} is installed, though requirements/overrides.txt removes it: "
            f"`{sys.executable} -m uv pip uninstall --python {sys.executable} {name}`"
        )


@pytest.mark.parametrize("module", ["ray", "pandas", "transformers", "torch"])
def test_the_installed_packages_carry_their_bytecode(module):
    """`make setup` compiles every package at install time (uv --compile-bytecode).

    Containers often set PYTHONDONTWRITEBYTECODE=1 (this machine does): then no process ever writes a .pyc,
    and every Ray worker compiled pandas, torch and Ray from source when it imported them, about 5 s of
    CPU per process; a 2-worker Ray Train start-up took twice as long.
    """
    package = Path(__import__(module).__file__).parent
    cached = package / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
    assert cached.exists(), f"{module} has no bytecode: reinstall with `make setup` (rm {ROOT / '.venv'} first)"
