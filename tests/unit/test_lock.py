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

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"
PYPROJECT = ROOT / "pyproject.toml"
sys.path.insert(0, str(ROOT / "scripts"))
import check_python  # noqa: E402  (scripts/ is not a package)

LOWEST, TOO_NEW = check_python.required_range(PYPROJECT.read_text())
# Every supported Python: the oldest one the project allows, then each newer series.
PYTHONS = [".".join(map(str, LOWEST))] + [
    f"{major}.{minor}" for major, minor in reversed(check_python.supported_minors(LOWEST, TOO_NEW)[:-1])
]
TENSORFLOW_PYTHONS = {python for python in PYTHONS if tuple(map(int, python.split("."))) < (3, 14)}

# The supported platforms: uv's name for each, and the marker values of such a machine.
PLATFORMS = {
    "linux-x86_64": ("x86_64-manylinux_2_28", {"sys_platform": "linux", "platform_machine": "x86_64"}),
    "linux-aarch64": ("aarch64-manylinux_2_28", {"sys_platform": "linux", "platform_machine": "aarch64"}),
    "macos-arm64": ("aarch64-apple-darwin", {"sys_platform": "darwin", "platform_machine": "arm64"}),
}
MACOS = "14.0"  # the oldest macOS the course supports (torch 2.13.0's wheels need 14)


def marker_environment(platform: str, python: str) -> dict[str, str]:
    """The values environment markers see on ``platform`` with ``python``."""
    _, values = PLATFORMS[platform]
    full = python if python.count(".") == 2 else f"{python}.0"
    system = {"linux": "Linux", "darwin": "Darwin"}[values["sys_platform"]]
    return {
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
        "platform_system": system,
        "platform_release": "",
        "platform_version": "",
        "python_version": ".".join(python.split(".")[:2]),
        "python_full_version": full,
        "implementation_version": full,
        "extra": "",
        **values,
    }


def locked(platform: str, python: str = PYTHONS[0]) -> list[str]:
    """The ``name==version`` pins of the lock that apply on ``platform`` with ``python``."""
    environment = marker_environment(platform, python)
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


def test_the_supported_pythons_are_3_11_5_to_3_14():
    assert PYTHONS == ["3.11.5", "3.12", "3.13", "3.14"]


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize(
    "platform, present, absent",
    [
        ("linux-x86_64", {"xgboost-cpu", "tensorflow-cpu"}, {"xgboost", "tensorflow"}),
        ("linux-aarch64", {"xgboost", "tensorflow"}, {"xgboost-cpu", "tensorflow-cpu"}),
        ("macos-arm64", {"xgboost", "tensorflow"}, {"xgboost-cpu", "tensorflow-cpu"}),
    ],
)
def test_platform_specific_packages_follow_the_markers(platform, present, absent, python):
    names = {pin.split("==")[0] for pin in locked(platform, python)}
    if python not in TENSORFLOW_PYTHONS:  # TensorFlow 2.21 has no wheels for 3.14: installed without it
        present, absent = present - {"tensorflow", "tensorflow-cpu"}, absent | {"tensorflow", "tensorflow-cpu"}
    assert present <= names and not absent & names
    assert {"torch", "ray", "transformers", "xgboost" if "xgboost" in present else "xgboost-cpu"} <= names
    if platform == "macos-arm64":
        assert not {name for name in names if name.startswith(("nvidia-", "cuda-"))}, "no CUDA packages on a Mac"


@pytest.fixture(scope="module")
def index_cache(tmp_path_factory) -> Path:
    """One uv cache for the module's dry runs: each reads the same index pages (nothing is downloaded)."""
    return tmp_path_factory.mktemp("uv-cache")


def dry_run(platform: str, python: str, lock: Path, target: Path, cache: Path) -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "uv", "pip", "install", "--dry-run", "--no-deps", "--only-binary", ":all:",
        "--python-platform", PLATFORMS[platform][0], "--python-version", python, "--target", str(target),
        "--cache-dir", str(cache), "--quiet", "-r", str(lock),
    ]  # fmt: skip
    env = {**os.environ, "MACOSX_DEPLOYMENT_TARGET": MACOS}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.network
@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_every_locked_package_has_a_wheel_for_the_platform(platform, python, tmp_path, index_cache):
    """Fails naming each package (up to five) that has no wheel for the platform and Python."""
    lock, missing = tmp_path / "lock.txt", []
    lines = LOCK.read_text().splitlines()
    for _ in range(5):
        lock.write_text("\n".join(lines) + "\n")
        result = dry_run(platform, python, lock, tmp_path / "target", index_cache)
        if result.returncode == 0:
            break
        found = re.search(r"Because (\S+)==(\S+) has no (?:usable wheels|wheels with a matching)", result.stderr)
        assert found, f"the dry run for {platform}, Python {python} failed:\n{result.stderr[-2000:]}"
        missing.append(f"{found.group(1)}=={found.group(2)}")
        lines = [line for line in lines if not line.startswith(f"{found.group(1)}==")]
    assert not missing, (
        f"no wheel for {platform} (Python {python}) of: {', '.join(missing)}. Give these packages an "
        "environment marker in pyproject.toml (as xgboost-cpu has) and run `make lock`."
    )


@pytest.mark.network
@pytest.mark.parametrize(
    "platform, python, pin",
    [("macos-arm64", "3.13", "tensorflow-cpu==2.21.0"), ("linux-x86_64", "3.14", "h5py==3.14.0")],
)
def test_the_dry_run_names_a_package_without_a_wheel(platform, python, pin, tmp_path, index_cache):
    """The check itself can fail: tensorflow-cpu has no macOS wheel, TensorFlow's h5py none for 3.14."""
    lock = tmp_path / "lock.txt"
    lock.write_text(pin + "\n")
    result = dry_run(platform, python, lock, tmp_path / "target", index_cache)
    assert result.returncode != 0 and re.search(
        f"{pin} has no (usable wheels|wheels with a matching)", result.stderr
    ), result.stderr


# --- the interpreter check that `make setup` runs first -------------------------------------------


@pytest.mark.parametrize("version", [(3, 11, 2), (3, 10, 14), (3, 15, 0), (3, 9, 18)])
def test_a_python_the_lock_cannot_serve_gets_the_versions_and_one_command(version):
    message = check_python.advice(version, LOWEST, TOO_NEW, "python3")
    assert message and f"`python3` is Python {'.'.join(map(str, version))}" in message
    assert "Python 3.11 to 3.14 (3.11.5 or newer in the 3.11 series)" in message
    assert "uv python install 3.14 && make setup PYTHON=$(uv python find 3.14)" in message


@pytest.mark.parametrize("version", [(3, 11, 5), (3, 12, 1), (3, 13, 0), (3, 14, 2), sys.version_info])
def test_the_pythons_the_lock_serves_pass(version):
    assert check_python.advice(version, LOWEST, TOO_NEW) is None


def fake_pythons(folder: Path, versions: dict[str, str | None]) -> str:
    """Executables named like interpreters that print a version (None: a shim that fails, as pyenv's do)."""
    folder.mkdir()
    for name, version in versions.items():
        body = f"echo {version}" if version else "echo 'pyenv: command not found' >&2; exit 127"
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return str(folder)


@pytest.mark.parametrize(
    "versions, chosen",
    [
        ({"python3.12": "3.12.3", "python3.13": "3.13.5", "python3": "3.13.5"}, "python3.13"),
        ({"python3.14": None, "python3.13": None, "python3.11": "3.11.7", "python3": "3.11.7"}, "python3.11"),
        ({"python3": "3.14.0"}, "python3"),
        ({"python3.11": "3.11.2", "python3": "3.12.1"}, "python3"),  # Debian 12's 3.11.2 is too old
    ],
)
def test_make_setup_finds_the_newest_supported_python_on_the_path(tmp_path, versions, chosen):
    path = fake_pythons(tmp_path / "bin", versions)
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_python.py"), "--find"],
        capture_output=True, text=True, env={**os.environ, "PATH": path},
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout.strip() == f"{path}/{chosen}", result.stderr


def test_without_a_fitting_python_the_finder_names_the_versions_and_the_command(tmp_path):
    path = fake_pythons(tmp_path / "bin", {"python3.13": None, "python3": "3.10.12"})
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_python.py"), "--find"],
        capture_output=True, text=True, env={**os.environ, "PATH": path},
    )  # fmt: skip
    assert result.returncode == 1 and not result.stdout
    assert f"`{path}/python3` is Python 3.10.12" in result.stderr and "uv python install 3.14" in result.stderr


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs Debian's own python3")
def test_make_setup_stops_before_pip_with_an_old_python(tmp_path):
    """Debian 12's python3 is 3.11.2: `make setup` must say so, and create nothing."""
    version = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:3])"], capture_output=True)
    if b"(3, 11, 5)" <= version.stdout < b"(3, 15, 0)":
        pytest.skip("this machine's /usr/bin/python3 is one the course supports")
    venv = tmp_path / "env"
    result = subprocess.run(
        ["make", "-C", str(ROOT), "setup", "PYTHON=/usr/bin/python3", f"VENV={venv}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "cannot run this course" in result.stderr and "uv python install" in result.stderr
    assert not venv.exists(), "nothing may be installed with a Python that cannot serve"


def test_environment_yml_brings_the_python_and_leaves_the_install_to_make_setup():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    python = next(d for d in environment["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert python == f"python>={PYTHONS[0]},<{'.'.join(map(str, TOO_NEW))}", (
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
