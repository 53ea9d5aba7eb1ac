"""Notebook 06 serves the fine-tuned model with Ray Serve: it runs, learns and reads well as every notebook must, and
while its service is up (before its last cell stops it) the service is checked from outside, as people use it:

* bad input over HTTP (not an image, an empty body, an oversized image) gets a 4xx with a message, and the next good
  request its answer;
* nothing of Ray's listens beyond 127.0.0.1, the replicas' own servers included;
* its page, in headless Chromium (Debian's `chromium`, with Playwright), where that browser is installed: a person
  picks an image and sees the class and its probability, or a message for a file that is not an image.

Afterwards, nothing it started is left: no Serve actor on the cluster, nothing listening on its port. The same holds
for a copy of the notebook that fails half way, once Serve and a deployment are up.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import nbformat
import pytest
import requests
from executed import BROWSER_READY, CHROMIUM, EXECUTED, NOTEBOOKS, SERVE, headline_problem, problems, run
from ports import listening_beyond_loopback

from course import config, results, serving
from course.distributed import free_loopback_port
from course.sources import get_sources

NOTEBOOK = next(p for p in NOTEBOOKS if p.stem == SERVE)
OUT = config.RESULTS_DIR / "serve"
SERVE_ACTORS = ("ServeController", "ProxyActor", "ServeReplica")
SKIPPED = "browser check of notebook 06's page SKIPPED: no Chromium or Playwright here (apt-get install chromium)"

pytestmark = [pytest.mark.notebook, pytest.mark.cluster]


@pytest.fixture(scope="module", autouse=True)
def attached():
    """This process attached to the cluster in $RAY_ADDRESS (or a local Ray), to list its actors."""
    import ray

    from course.cluster import init_ray

    init_ray()
    yield
    ray.shutdown()


def serve_actors() -> list[str]:
    """Serve's actors alive on the cluster: its controller, proxies and replicas."""
    from ray.util.state import list_actors

    alive = list_actors(filters=[("state", "=", "ALIVE")], limit=1000)
    return [actor.class_name for actor in alive if actor.class_name.startswith(SERVE_ACTORS)]


def left_running(port: int, seconds: float = 60) -> list[str]:
    """What the notebook left behind, after giving it ``seconds`` to stop: Serve's actors, a listener on its port."""
    deadline = time.monotonic() + seconds
    while True:
        found = serve_actors() + ([f"something listens on 127.0.0.1:{port}"] if serving.is_listening(port) else [])
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(2)


def held_out_image() -> Path:
    return Path(get_sources().imagenette) / "val" / "n02102040" / "n02102040_val_00000.JPEG"


def check_bad_input(base_url: str) -> list[str]:
    """The service's answers to bad input: a 4xx with a message each, then the good image answered."""
    found = []
    bodies = serving.probe_bodies(held_out_image().read_bytes())
    for what, body in bodies.items():
        reply = requests.post(f"{base_url}/predict", data=body, timeout=60)
        if what == "a good image":
            if reply.status_code != 200 or reply.json().get("label") not in ("dog", "fish"):
                found.append(f"after the bad requests, a good image got {reply.status_code} {reply.text[:200]}")
        elif not 400 <= reply.status_code < 500 or len(reply.json().get("error", "")) < 20:
            found.append(f"{what}: {reply.status_code} {reply.text[:200]} (expected a 4xx with a message)")
    return found


def check_page(base_url: str) -> list[str]:
    """A person on the page: picks a held-out image, then a text file; what the page shows each time."""
    from playwright.sync_api import sync_playwright

    expected = requests.post(f"{base_url}/predict", data=held_out_image().read_bytes(), timeout=60).json()
    not_an_image = OUT / "not-an-image.txt"
    not_an_image.write_text("a dog, I promise\n")
    found = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        page = browser.new_page(viewport={"width": 900, "height": 700})
        page.goto(f"{base_url}/", timeout=60_000)
        answer = page.locator("#answer")
        page.set_input_files("#file", str(held_out_image()))
        page.wait_for_function("/%\\)$/.test(document.getElementById('answer').textContent)", timeout=60_000)
        shown = answer.text_content()
        want = f"{expected['label']} (probability {100 * expected['probability']:.1f}%)"
        if shown != want:
            found.append(f"after picking an image the page shows {shown!r}, not {want!r}")
        page.screenshot(path=str(OUT / "page.png"))
        page.set_input_files("#file", str(not_an_image))
        page.wait_for_selector("#answer.error", timeout=60_000)
        shown = answer.text_content()
        if not re.match(r"^4\d\d: the body is not an image", shown):
            found.append(f"after picking a text file the page shows {shown!r}")
        page.screenshot(path=str(OUT / "page-error.png"))
        browser.close()
    return found


@pytest.fixture(scope="module")
def served(monkeypatch_module):
    """Notebook 06, run as `make run` runs it; its service checked from outside before its last cell stops it."""
    OUT.mkdir(parents=True, exist_ok=True)
    port = free_loopback_port()
    monkeypatch_module.setenv(config.SERVE_PORT_ENV, str(port))
    base_url = f"http://127.0.0.1:{port}"
    checked: dict[str, list[str] | None] = {"bad input": None, "page": None, "loopback": None}

    def before_cell(source: str) -> None:  # runs in nbclient's event loop: the checks get a thread of their own
        if not source.startswith("serve.shutdown()"):
            return

        def look() -> None:
            checked["loopback"] = listening_beyond_loopback()  # while every deployment is up
            for name, check in (("bad input", check_bad_input), ("page", check_page)):
                if name == "page" and not BROWSER_READY:
                    continue
                try:
                    checked[name] = check(base_url)
                except Exception as error:  # a finding, reported by the test
                    checked[name] = [f"{type(error).__name__}: {str(error)[:500]}"]

        looking = threading.Thread(target=look)
        looking.start()
        looking.join()

    results.metrics_path(NOTEBOOK.stem).unlink(missing_ok=True)
    started = time.perf_counter()
    outcome = run(NOTEBOOK, EXECUTED, before_cell=before_cell)
    print(f"{NOTEBOOK.name}: {outcome.status} in {time.perf_counter() - started:.0f} s")
    return outcome, port, checked


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_notebook_06_runs_learns_reads_well_and_leaves_nothing_running(served):
    outcome, port, checked = served
    assert outcome.ok, f"{NOTEBOOK.name}: {outcome.status} (executed copy in results/executed/)"
    wrong = headline_problem(results.read(NOTEBOOK.stem))
    assert not wrong, f"{NOTEBOOK.name}: {wrong}"
    found = problems(NOTEBOOK)
    assert not found, f"{NOTEBOOK.name}: " + "; ".join(found)
    assert not left_running(port), f"after {NOTEBOOK.name}: {left_running(port, 0)} still there"


def test_bad_input_gets_a_4xx_with_a_message_and_the_service_goes_on(served):
    _, _, checked = served
    assert checked["bad input"] is not None, "the service was never checked: the notebook stopped before its last cell"
    assert not checked["bad input"], checked["bad input"]


def test_while_it_serves_nothing_listens_beyond_loopback(served):
    """Serve's proxy, controller and replicas (whose gRPC server Ray binds to every interface: worker_setup)."""
    _, _, checked = served
    assert checked["loopback"] is not None, "never looked: the notebook stopped before its last cell"
    assert not checked["loopback"], f"listening beyond 127.0.0.1 while serving: {checked['loopback']}"


def test_a_person_gets_an_answer_from_the_page(served):
    if not BROWSER_READY:
        pytest.skip(SKIPPED)
    _, _, checked = served
    assert checked["page"] is not None, "the page was never checked: the notebook stopped before its last cell"
    assert not checked["page"], json.dumps(checked["page"], indent=1)


def test_a_run_that_fails_half_way_leaves_nothing_running(tmp_path, monkeypatch):
    """The notebook up to its first deployment, then a cell that fails: the kernel stops, and Serve with it."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    first_run = next(i for i, cell in enumerate(notebook.cells) if "serve.run(" in cell.source)
    notebook.cells = notebook.cells[: first_run + 1] + [
        nbformat.v4.new_code_cell('raise RuntimeError("stopped half way, on purpose")')
    ]
    assert sum(cell.cell_type == "code" and "serve.start(" in cell.source for cell in notebook.cells) == 1
    half = tmp_path / "06_half_way.ipynb"
    nbformat.write(notebook, half)
    port = free_loopback_port()
    monkeypatch.setenv(config.SERVE_PORT_ENV, str(port))
    outcome = run(half, tmp_path / "executed")
    assert "stopped half way, on purpose" in outcome.status, outcome.status
    assert not left_running(port), f"after a failed run: {left_running(port, 0)} still there"
