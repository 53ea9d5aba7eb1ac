"""`make setup` on a machine where a first try went wrong: a Python that cannot make a venv with pip (Debian's and
Ubuntu's python3 without `python3.X-venv`) is told the package to install before anything is made, and a `.venv`
left without pip by such a try is made again by the next `make setup`, which says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import check_python  # noqa: E402  (scripts/ is not a package)


def test_debian_is_told_the_package_that_brings_venv():
    message = check_python.venv_advice(False, (3, 13, 5), debian=True)
    assert "sudo apt install python3.13-venv" in message and "run the same make command again" in message
    assert check_python.venv_advice(True, (3, 13, 5), debian=True) is None


def test_elsewhere_the_advice_names_the_package_and_a_python_that_has_it():
    message = check_python.venv_advice(False, (3, 12, 1), debian=False)
    assert "python3.12-venv" in message and "uv python install 3.12" in message


def test_a_python_without_ensurepip_stops_before_anything_is_made(tmp_path):
    hidden = tmp_path / "hidden" / "ensurepip"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('ensurepip is not installed here (as on Debian)')\n")
    env = {"PYTHONPATH": str(tmp_path / "hidden"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_python.py"), "--venv"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode == 1
    assert "cannot make a virtual environment with pip" in result.stderr and "-venv" in result.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="a venv's layout as on Linux")
def test_a_venv_left_without_pip_is_made_again(tmp_path):
    venv = tmp_path / "env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )  # what Debian's failure leaves
    # PYTHON=/bin/false: the setup stops at its Python check, right after the healing, so the test installs nothing
    result = subprocess.run(
        ["make", "-C", str(ROOT), "setup", "PYTHON=/bin/false", f"VENV={venv}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "has no working pip (an earlier setup stopped half-way): making it again" in result.stdout, result.stdout
    assert not venv.exists(), "the half-made venv must go, or every later setup fails on it"
