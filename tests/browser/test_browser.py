"""The lessons run in JupyterLab as a learner runs them: in a real browser, one after another, at the tests' size.

Playwright drives headless Chromium (Debian's `chromium`) against `make lab`, serving copies of the notebooks
(results/browser/notebooks, so that saving never touches notebooks/), whose kernels run at the tests' size
(executed.TEST_SIZE: the smoke size, or the course size with COURSE_TEST_SIZE=course). For each notebook
(executed.IN_THE_BROWSER, in order): open it, Run > Run All Cells, wait until the kernel is idle, save. The earlier
kernels stay alive, as they do for a learner. Then, from the saved file: every code cell ran, no output is an error or a
traceback, nothing on stderr that the notebook does not explain (executed.stderr_problems), and the line with the
headline beside its floor (results.record's) is there; reopened, no widget fails to display. Then MLflow's UI, which
`make lab` serves beside JupyterLab, shows notebook 07's trials and notebook 02's evaluations
(tests/support/mlflow_ui.py). The saved copies are also checked as tests/lessons/test_notebooks.py checks an executed
copy (a headline from a run of this size, above its floor at the course size; output a reader can follow), which then
leaves these notebooks to this test (notebook 06 runs in tests/lessons/test_serve.py, which drives Chromium too). The
kernels run without pytest's marker, as under `make lab` by hand. A screenshot of each notebook's end is kept in
results/browser/.

Skipped, saying so, where Chromium or Playwright is missing (.ci/run installs Chromium).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from executed import BROWSER_READY, CHROMIUM, IN_THE_BROWSER, NOTEBOOK_ENV, headline_problem, problems, run_course
from mlflow_ui import ui_address, ui_problems
from ports import SocketWatch

from course import results
from course.distributed import free_loopback_port

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import steps  # noqa: E402  (scripts/ is not a package)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "results" / "browser"
NOTEBOOK_SECONDS = 900  # the longest a notebook may take here before the test gives up on it
RUN_ALL_AGAIN_S = 45  # Run All again if no cell is queued or running this long after choosing it

pytestmark = [
    pytest.mark.notebook,
    pytest.mark.skipif(
        not BROWSER_READY,
        reason="browser test SKIPPED: no Chromium or Playwright here (apt-get install chromium; make setup)",
    ),
]


@pytest.fixture(scope="module")
def lab():
    """`make lab` on a free port, on copies of the notebooks, with a token of its own; stopped afterwards."""
    shutil.rmtree(OUT, ignore_errors=True)
    folder = OUT / "notebooks"
    folder.mkdir(parents=True)
    for name in IN_THE_BROWSER:
        shutil.copy(ROOT / "notebooks" / f"{name}.ipynb", folder)
    port, token = free_loopback_port(), secrets.token_hex(16)
    process = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_PORT={port}", f"LAB_DIR={folder}"],
        cwd=ROOT,
        # a workspace of its own: JupyterLab would reopen the notebooks a previous run left open
        env={
            **run_course.kernel_env(),
            **NOTEBOOK_ENV,  # the tests' size
            "BROWSER": "true",
            "JUPYTER_TOKEN": token,
            "JUPYTERLAB_WORKSPACES_DIR": str(OUT / "workspaces"),
        },
        stdout=(OUT / "lab.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while f"127.0.0.1:{port}/" not in (OUT / "lab.log").read_text():
            assert process.poll() is None and time.monotonic() < deadline, (OUT / "lab.log").read_text()
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", token, folder
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=90)


ACTIVE = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in front


def dismiss_kernel_dialog(page) -> None:
    """Answer JupyterLab's "Select Kernel" as a learner would: the preferred kernel, Python 3."""
    button = page.locator(".jp-Dialog").get_by_role("button", name="Select", exact=True)
    if button.count():
        button.first.click()


def run_all(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def run_all_and_save(page, base: str, token: str, name: str, first: bool) -> None:
    """Open ``name`` (the first from its address, the others from the file browser), Run All, wait, save."""
    if first:
        page.goto(f"{base}/lab/tree/{name}.ipynb?token={token}")
    else:
        page.locator(".jp-DirListing-itemText", has_text=f"{name}.ipynb").first.dblclick()
    page.wait_for_selector(f"{ACTIVE} .jp-Cell", timeout=120_000)
    page.wait_for_timeout(2000)
    dismiss_kernel_dialog(page)
    run_all(page)
    running = page.locator(f"{ACTIVE} .jp-InputPrompt", has_text="[*]")
    start = time.monotonic()
    deadline, seen, quiet, clicked = start + NOTEBOOK_SECONDS, False, 0, start
    while quiet < 4:  # no cell queued or running at four looks in a row: Run All has finished (or stopped)
        if time.monotonic() > deadline or (not seen and time.monotonic() > start + 240):
            page.screenshot(path=str(OUT / f"{name}-stuck.png"))
            raise AssertionError(f"{name}: {'still running' if seen else 'Run All did not start'} (see the screenshot)")
        if not seen and time.monotonic() > clicked + RUN_ALL_AGAIN_S:
            # a Run All chosen while the new kernel was still connecting queued nothing (seen once on a busy
            # machine: every cell stayed `[ ]`, the kernel idle): a learner would choose it again
            dismiss_kernel_dialog(page)
            run_all(page)
            clicked = time.monotonic()
        page.wait_for_timeout(500)
        dismiss_kernel_dialog(page)
        busy = running.count() > 0
        seen = seen or busy
        quiet = 0 if busy or not seen else quiet + 1
    saved, pressed = OUT / "notebooks" / f"{name}.ipynb", time.time()
    page.keyboard.press("Control+s")
    while saved.stat().st_mtime < pressed:  # the save has reached the disk
        assert time.time() < pressed + 60, f"{name}: Ctrl+S did not save within a minute"
        page.wait_for_timeout(500)


def findings(saved: dict) -> list[str]:
    """What a learner should not see in a saved notebook: a cell that did not run, an error, a traceback outside
    stderr (stderr is looked at by executed.problems, with what the notebook explains)."""
    found = []
    for index, cell in enumerate(saved["cells"]):
        if cell["cell_type"] != "code":
            continue
        if cell.get("execution_count") is None:
            found.append(f"cell {index} did not run")
        for output in cell.get("outputs", []):
            if output["output_type"] == "error":
                found.append(f"cell {index}: {output['ename']}: {output['evalue'][:200]}")
            elif output.get("name") != "stderr" and "Traceback" in json.dumps(output.get("data", {})) + "".join(
                output.get("text", "")
            ):
                found.append(f"cell {index} shows a traceback")
    return found


def floor_line(saved: dict) -> str | None:
    """The line that prints the headline beside its floor (course.results.record): held to it at the course size
    (`... ≥ floor ✓`), printed beside it at the smoke size (`... not enforced: COURSE_SMOKE=1 ...`)."""
    for cell in saved["cells"]:
        for output in cell.get("outputs", []):
            for line in "".join(output.get("text", "")).splitlines():
                if "exercise" in line:
                    continue
                if ("≥" in line and line.endswith("✓")) or ("its floor with the" in line and "not enforced" in line):
                    return line
    return None


def test_notebooks_run_all_in_jupyterlab_one_after_another(lab):
    base, token, folder = lab
    from playwright.sync_api import sync_playwright

    began, began_wall = time.monotonic(), time.time()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        failures = {}
        for index, name in enumerate(IN_THE_BROWSER):
            started = time.monotonic()
            results.metrics_path(name).unlink(missing_ok=True)
            with SocketWatch(name) as watch:  # the lab's kernels and the cluster, sampled while the notebook runs
                run_all_and_save(page, base, token, name, first=index == 0)
            page.locator(f"{ACTIVE} .jp-Cell").last.scroll_into_view_if_needed()
            page.wait_for_timeout(1000)
            page.screenshot(path=str(OUT / f"{name}.png"))
            saved = json.loads((folder / f"{name}.ipynb").read_text())
            found = findings(saved) + problems(folder / f"{name}.ipynb", folder) + watch.problems()
            if floor_line(saved) is None:
                found.append("no line with the headline beside its floor in the outputs")
            wrong = headline_problem(results.read(name))
            found += [wrong] if wrong else []
            print(f"{name}: {time.monotonic() - started:.0f} s in the browser, floor line: {floor_line(saved)}")
            if found:
                failures[name] = found
        # reopened from disk, a saved notebook shows no broken widget
        for name in IN_THE_BROWSER:
            page.goto(f"{base}/lab/tree/{name}.ipynb?token={token}&reset")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_timeout(1500)
            if page.get_by_text("Error displaying widget").count():
                failures.setdefault(name, []).append("reopened, it shows 'Error displaying widget'")
        # MLflow's UI, served beside the lab at the address it printed: 07's trials and 02's evaluations are there
        ui = ui_address((OUT / "lab.log").read_text())
        found = ui_problems(page, ui) if ui else ["`make lab` printed no address of MLflow's UI"]
        page.screenshot(path=str(OUT / "mlflow-ui.png"))
        if found:
            failures["MLflow's UI"] = found
        browser.close()
    steps.record("its browser test", began_wall, time.monotonic() - began, 1 if failures else 0)  # .ci/run's table
    assert not failures, json.dumps(failures, indent=1, ensure_ascii=False)
