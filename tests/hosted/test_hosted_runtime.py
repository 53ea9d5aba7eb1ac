"""A lesson opened on its own, on a stand-in of a hosted runtime (issue 59): a fresh venv that holds what Google Colab
preinstalls at the lowest versions pyproject.toml admits, one notebook copied alone into an empty folder, its install
cell (course.links) pointed at a copy of this checkout, executed top to bottom at the smoke size on a local Ray of one
node. The runtime's own packages must be left as they were, and a second run of the install cell installs nothing.

Two exceptions to "as on Colab". torch: this venv gets it as `make setup` installs it (the CPU build, locally
available), not Colab's 2.11 CUDA build of several GB; its Python is this one's, for the same reason: the CPU wheel at
hand is built for it. transformers: 5.18.0, not Colab's 5.15 (HOSTED, below, says why). docs/development.md, "A
lesson on a hosted runtime", says more.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from course import links

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from doctor_checks.versions import locked_versions  # noqa: E402  (how the doctor reads the lock's pins)

NOTEBOOK = "02_ray_train_finetune"  # Ray Train on one node, over transformers, datasets and accelerate
# Google Colab's runtime since 2026-08-19 (googlecolab/backend-info): the lowest versions pyproject.toml admits. But
# transformers: Colab's 5.15 has torchvision beside it, and 5.15 to 5.17 export a placeholder for AutoImageProcessor
# where torchvision is missing; no torchvision loads with the CPU torch here, so this runtime takes 5.18.0, the lowest
# release without that placeholder (docs/development.md, "A lesson on a hosted runtime").
HOSTED = {"transformers": "5.18.0", "datasets": "4.0.0", "accelerate": "1.14.0"}
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
pytestmark = [pytest.mark.network, pytest.mark.notebook]


def run(*command: str | Path, **options) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], check=True, capture_output=True, text=True, **options)


def installed(python: Path) -> dict[str, str]:
    """name -> version of every distribution in ``python``'s environment."""
    listing = run(python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check").stdout
    return {row["name"].lower(): row["version"] for row in json.loads(listing)}


def hosted_runtime(folder: Path) -> Path:
    """A venv with the hosted runtime's preinstalled packages (and torch as make setup installs it); its python."""
    run(sys.executable, "-m", "venv", folder)
    python = folder / "bin" / "python"
    torch = locked_versions((ROOT / "requirements" / "lock.txt").read_text())["torch"]
    index: list[str] = []
    try:
        run(python, "-c", f"import urllib.request; urllib.request.urlopen('{CPU_TORCH_INDEX}/torch/', timeout=5)")
        index = ["--index-url", CPU_TORCH_INDEX, "--extra-index-url", "https://pypi.org/simple"]
    except subprocess.CalledProcessError:
        pass  # as make setup: pip's own configuration finds it (this machine: a local CPU wheel)
    run(python, "-m", "pip", "install", "--quiet", "--no-deps", *index, f"torch=={torch}")
    pins = [f"{name}=={version}" for name, version in HOSTED.items()]
    run(sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", python, *pins, "ipykernel")
    return python


def checkout_copy(folder: Path) -> Path:
    """The files git tracks in this checkout, as they are now: what COURSE_PACKAGE points the install cell at."""
    for name in run("git", "ls-files", cwd=ROOT).stdout.splitlines():
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


def test_a_lesson_opened_alone_installs_the_course_leaves_the_runtime_as_it_was_and_runs(
    tmp_path, monkeypatch, ray_temp_dir, left_running
):
    started = time.monotonic()
    venv = tmp_path / "runtime"
    python = hosted_runtime(venv)
    before = installed(python)
    assert "vit-ray-course" not in before and "ray" not in before
    prepared_s = time.monotonic() - started

    lesson = tmp_path / "lesson"  # a folder with the notebook alone in it
    lesson.mkdir()
    shutil.copy(ROOT / "notebooks" / f"{NOTEBOOK}.ipynb", lesson)
    kernels = tmp_path / "jupyter"
    run(python, "-m", "ipykernel", "install", "--prefix", kernels, "--name", "hosted", "--display-name", "hosted")
    for name in [name for name in os.environ if name.startswith(("COURSE_", "RAY_")) or name == "PYTHONPATH"]:
        monkeypatch.delenv(name)  # nothing of this session's cluster or settings: a runtime of its own
    monkeypatch.setenv("RAY_TMPDIR", ray_temp_dir)  # nor another cluster on this machine to attach to
    monkeypatch.setenv("JUPYTER_PATH", str(kernels / "share" / "jupyter"))
    monkeypatch.setenv("COURSE_PACKAGE", str(checkout_copy(tmp_path / "checkout")))
    monkeypatch.setenv("COURSE_SMOKE", "1")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")

    notebook = nbformat.read(lesson / f"{NOTEBOOK}.ipynb", as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="hosted").execute(cwd=str(lesson))
    ran_s = time.monotonic() - started - prepared_s

    after = installed(python)
    for name in [*HOSTED, "torch"]:
        assert after[name] == before[name], f"the install cell changed {name}: {before[name]} -> {after[name]}"
    assert after["vit-ray-course"] and after["ray"].startswith("2.")
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    said = "".join(output.get("text", "") for output in first.outputs)
    assert "installing the course from" in said, f"the install cell said: {said!r}"
    record = json.loads((lesson / "results" / "metrics" / f"{NOTEBOOK}.json").read_text())
    assert record["run"]["size"] == "smoke" and record["value"] > 0, record
    assert (lesson / "data").is_dir(), "the lesson built its stand-ins beside it"

    again = run(python, "-c", links.install_cell(links.repository_url()), cwd=lesson)
    assert again.stdout == "" and installed(python) == after, "a second run of the install cell installed something"
    left = left_running(venv)
    assert not left, f"left running: {[p.info['cmdline'][:3] for p in left]}"
    print(f"hosted runtime: prepared in {prepared_s:.0f} s, {NOTEBOOK} installed and ran in {ran_s:.0f} s")
