"""The course's site (`make site`: scripts/build_site.py), as a learner's browser shows it.

`make test` builds it from the notebooks its first session has just executed, then runs these tests: Chromium (the
browser test's Playwright) opens every page from ``python -m http.server``'s twin on 127.0.0.1, and every request
that would leave the site fails the page. Without Chromium the module skips, and says why."""

from __future__ import annotations

import functools
import http.server
import io
import json
import re
import tempfile
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from executed import BROWSER_READY, CHROMIUM, NOTEBOOKS, ROOT, exercise_checks, stderr_problems

from course.config import RESULTS_DIR

SITE = RESULTS_DIR / "site"
SOURCE = RESULTS_DIR / "site-source"
MAX_BYTES = 30_000_000
pytestmark = [
    pytest.mark.site,
    pytest.mark.skipif(not BROWSER_READY, reason="Chromium or Playwright is missing: the site is checked in Chromium"),
]


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request would bury the test's own output
        pass


@pytest.fixture(scope="module")
def base():
    assert (SITE / "index.html").is_file(), f"no site in {SITE}: run `make site` after `make test` or `make run`"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(SITE)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def pages() -> list[str]:
    """Every page of the site (not the theme's own templates under _static/)."""
    return sorted(
        str(p.relative_to(SITE)) for p in SITE.rglob("*.html") if not p.relative_to(SITE).parts[0].startswith("_")
    )


@pytest.fixture(scope="module")
def visited(base):
    """Every page opened once: its console errors, requests that left the site, links, anchors, text, and for each
    figure whether it drew anything (its screenshot holds more than one colour)."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    seen = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        outside: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.route(
            "**/*",
            lambda route: route.continue_() if route.request.url.startswith(base) else route.abort(),
        )
        page.on("requestfailed", lambda request: outside.append(request.url))
        for name in pages():
            errors.clear()
            outside.clear()
            page.goto(base + name, wait_until="load")
            figures = []
            for image in page.locator("div.cell_output img").all():
                image.scroll_into_view_if_needed()
                drawn = image.evaluate("i => i.complete && i.naturalWidth > 0")
                shot = Image.open(io.BytesIO(image.screenshot())).convert("RGB")
                extrema = shot.getextrema()
                figures.append(drawn and any(low != high for low, high in extrema))
            seen[name] = {
                "errors": list(errors),
                "outside": list(outside),
                "links": page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)"),
                "ids": set(page.eval_on_selector_all("[id]", "nodes => nodes.map(n => n.id)")),
                "text": page.inner_text("body"),
                "outputs": page.eval_on_selector_all("div.cell_output", "nodes => nodes.map(n => n.innerText)"),
                # stderr is vetted below against what its lesson explains (executed.stderr_problems)
                "not_stderr": page.eval_on_selector_all(
                    "div.cell_output .output:not(.stderr)", "nodes => nodes.map(n => n.innerText)"
                ),
                "figures": figures,
            }
        search = browser.new_page()
        search.goto(base + "search.html?q=ScalingConfig", wait_until="load")
        search.wait_for_selector("#search-results li, #search-results p", timeout=20_000)
        seen["search"] = search.eval_on_selector_all("#search-results li a", "links => links.map(a => a.href)")
        browser.close()
    return seen


def lesson_page(path: Path) -> str:
    return f"notebooks/{path.stem}.html"


def test_every_lesson_and_solution_has_a_page_and_the_landing_page_has_the_runs_table(visited):
    for path in NOTEBOOKS:
        assert lesson_page(path) in visited, f"{path.name} is not on the site"
        assert f"solutions/{path.stem}.html" in visited
        assert "This page shows the " in visited[lesson_page(path)]["text"], path.name
    landing = visited["index.html"]["text"]
    assert "The run this site shows" in landing
    for guide in ("docs/instructors.html", "docs/development.html"):
        assert guide in visited
    assert "COURSE_SMOKE" in visited["docs/development.html"]["text"], "the settings table is on the site"


def test_every_page_loads_with_no_console_error_and_nothing_from_outside(visited):
    for name, page in visited.items():
        if name == "search":
            continue
        assert not page["errors"], f"{name}: console errors {page['errors'][:3]}"
        assert not page["outside"], f"{name}: requests that left the site {page['outside'][:3]}"


def test_every_figure_renders_as_an_image_that_is_not_blank(visited):
    figures = [(name, drawn) for name, page in visited.items() if name != "search" for drawn in page["figures"]]
    assert len(figures) >= 5, "the lessons' plots (03's image grid, 02's curve, 05's timeline, ...) are on the site"
    blank = [name for name, drawn in figures if not drawn]
    assert not blank, f"figures that drew nothing: {blank}"


def test_every_internal_link_and_anchor_resolves(visited, base):
    broken = []
    for name, page in visited.items():
        if name == "search":
            continue
        for link in page["links"]:
            if not link.startswith(base):
                continue
            target = unquote(urlsplit(link).path).removeprefix(urlsplit(base).path) or "index.html"
            if target.endswith("/"):
                target += "index.html"
            if not (SITE / target).is_file():
                broken.append(f"{name} -> {target}")
                continue
            fragment = urlsplit(link).fragment
            if fragment and target in visited and unquote(fragment) not in visited[target]["ids"]:
                broken.append(f"{name} -> {target}#{fragment}")
    assert not broken, f"links that lead nowhere: {broken[:10]}"


def test_the_search_finds_scaling_config_on_the_page_that_teaches_it(visited, base):
    found = [urlsplit(link).path for link in visited["search"]]
    assert any(path.endswith("notebooks/02_ray_train_finetune.html") for path in found), found


def test_each_exercise_shows_its_checks_verdict(visited):
    for path in NOTEBOOKS:
        number = path.stem.split("_")[0]
        outputs = "\n".join(visited[lesson_page(path)]["outputs"])
        for index in range(1, len(exercise_checks(path)) + 1):
            assert re.search(rf"[✓…✗] exercise {re.escape(number)}\.{index}:", outputs), (
                f"{path.name}: exercise {number}.{index} shows no verdict"
            )


def test_no_page_carries_a_traceback_an_unexplained_warning_a_secret_or_a_path_of_this_machine(visited):
    secrets = []
    token = ROOT / ".cluster" / "auth_token"
    if token.is_file() and token.read_text().strip():
        secrets.append(token.read_text().strip())
    anywhere, in_outputs = [str(ROOT)], [str(Path.home()) + "/", tempfile.gettempdir() + "/"]  # the guides name /tmp
    for name, page in visited.items():
        if name == "search":
            continue
        text = page["text"]
        assert "Traceback (most recent call last)" not in "\n".join(page["not_stderr"]), name
        assert not re.search(r"token=[0-9a-f]{16,}", text), f"{name}: a token in a link or output"
        assert not any(secret in text for secret in secrets), f"{name}: Ray's auth token"
        outputs = "\n".join(page["outputs"])
        here = [place for place in anywhere if place in text] + [place for place in in_outputs if place in outputs]
        assert not here, f"{name}: a path of the machine that built it: {here}"
    for staged in SOURCE.glob("*/*.ipynb"):
        notebook = json.loads(staged.read_text())
        problems = stderr_problems(notebook)
        assert not problems, f"{staged.name}: stderr its lesson does not explain: {problems[:3]}"
        errors = [o for c in notebook["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
        assert not errors, f"{staged.name}: a cell that raised: {errors[0].get('ename')}"


def test_the_site_opens_from_its_folder_with_no_console_error():
    """A workshop room without a server: index.html opened as a file, a lesson with its figures, and the search."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        for name in ("index.html", "notebooks/03_ray_data.html"):  # 03: its image grids
            page.goto((SITE / name).as_uri(), wait_until="load")
            drawn = page.eval_on_selector_all("div.cell_output img", "images => images.map(i => i.naturalWidth)")
            assert all(drawn), f"{name}: a figure did not load from the folder"
        page.goto((SITE / "search.html").as_uri() + "?q=ScalingConfig", wait_until="load")
        page.wait_for_selector("#search-results li", timeout=20_000)
        found = page.eval_on_selector_all("#search-results li a", "links => links.map(a => a.href)")
        browser.close()
    assert not errors, f"console errors from the folder: {errors[:3]}"
    assert any(link.endswith("notebooks/02_ray_train_finetune.html") for link in found), found


def test_the_site_stays_small_and_has_a_sidebar_with_previous_and_next(visited, base):
    size = sum(path.stat().st_size for path in SITE.rglob("*") if path.is_file())
    assert size < MAX_BYTES, f"the site is {size / 1e6:.1f} MB (at most {MAX_BYTES / 1e6:.0f})"
    first, second = (lesson_page(path) for path in NOTEBOOKS[:2])
    links = [urlsplit(link).path for link in visited[first]["links"]]
    assert any(path.endswith(second) for path in links), "a lesson links to the next one"
