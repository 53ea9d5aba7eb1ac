"""Build the course's site (`make site`) from the executed copies of the last `make test` or `make run`.

Nothing executes here: the site shows the run the tests just checked. Sphinx with MyST-NB renders (site/conf.py):

- the README as the landing page, with the run's table of times and headlines;
- every lesson with its outputs, under a line that says which run it shows (commit, date, machine, sources, size,
  the lesson's time);
- the solutions on pages of their own, after the guides, so that a learner does not meet them by accident;
- docs/instructors.md, docs/development.md (the settings table with it) and data/README.md.

A lesson's copy is the newest of the browser test's (results/browser/notebooks) and `make run`'s or the tests'
(results/executed). Before rendering, each copy loses its progress bars (widgets the site cannot draw without
loading scripts from elsewhere) and the paths of the machine that ran it. The site lands in results/site/; open
results/site/index.html, or serve it with ``python -m http.server -d results/site -b 127.0.0.1``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course import results  # noqa: E402
from course.config import RESULTS_DIR  # noqa: E402
from course.lessons import LESSONS  # noqa: E402

SOURCE = RESULTS_DIR / "site-source"  # what Sphinx reads: the staged copies
SITE = RESULTS_DIR / "site"
LESSON_COPIES = [RESULTS_DIR / "browser" / "notebooks", RESULTS_DIR / "executed"]
SOLUTION_COPIES = [RESULTS_DIR / "executed-solutions"]
GUIDES = ["docs/instructors.md", "docs/development.md", "data/README.md"]
WIDGET = "application/vnd.jupyter.widget-view+json"
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]*)\)")


@dataclass(frozen=True)
class Page:
    """One lesson as the site shows it: its staged path (without suffix), title, and the run behind it."""

    document: str  # "notebooks/03_ray_data"
    title: str
    seconds: float | None  # the lesson's time in its executed copy
    record: dict


def newest_copy(name: str, folders: list[Path]) -> Path | None:
    """The most recently written executed copy called ``name`` in ``folders``, or None."""
    copies = [folder / name for folder in folders if (folder / name).is_file()]
    return max(copies, key=lambda path: path.stat().st_mtime) if copies else None


def run_times(notebook: dict) -> tuple[datetime | None, float | None]:
    """When the copy's first cell started, and the seconds from there to its last cell's end (None: not executed)."""
    spans = []
    for cell in notebook.get("cells", []):
        timing = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            spans.append(
                (
                    datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00")),
                    datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00")),
                )
            )
    if not spans:
        return None, None
    return spans[0][0], (max(end for _, end in spans) - spans[0][0]).total_seconds()


def redactions(root: Path = ROOT) -> list[tuple[re.Pattern, str]]:
    """What the machine that ran the notebooks leaves in their outputs, and what the site shows instead: the
    checkout's path, the temp folders of Ray and of the tests, the home folder, and Ray's auth token."""
    rules = [
        (re.escape(str(root)), "<course>"),
        (re.escape(tempfile.gettempdir()) + r"/[^\s'\"<>,;)\]]+", "<temp>"),
        (re.escape(str(Path.home())) + r"(?=[/\s'\"]|$)", "~"),
    ]
    token = root / ".cluster" / "auth_token"
    if token.is_file() and token.read_text().strip():
        rules.append((re.escape(token.read_text().strip()), "<token>"))
    return [(re.compile(pattern), replacement) for pattern, replacement in rules]


def redact(text: str, rules: list[tuple[re.Pattern, str]]) -> str:
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    return text


def relink(markdown: str, where: str, staged: set[str]) -> str:
    """Keep the links between pages of the site (``where`` is the file's path in the checkout); a link to any other
    file of the checkout becomes its text, since the site holds only the pages."""

    def one(match: re.Match) -> str:
        bang, text, target = match.groups()
        if bang or not target or target.startswith(("#", "http://", "https://", "mailto:")):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(where), path))
        if resolved == "README.md":
            resolved = "index.md"
        if resolved in staged:
            relative = os.path.relpath(resolved, os.path.dirname(where) or ".")
            return f"[{text}]({relative}{'#' + anchor if anchor else ''})"
        return text

    return LINK.sub(one, markdown)


def clean_outputs(notebook: dict, rules: list[tuple[re.Pattern, str]], stderr: bool = True) -> dict:
    """The copy without progress-bar widgets, widget state or the machine's paths (nor stderr, unless ``stderr``)."""
    notebook.get("metadata", {}).pop("widgets", None)
    for cell in notebook["cells"]:
        outputs = []
        for output in cell.get("outputs", []):
            if WIDGET in output.get("data", {}) or (not stderr and output.get("name") == "stderr"):
                continue
            if "text" in output:
                output["text"] = redact("".join(output["text"]), rules)
            for mime, value in output.get("data", {}).items():
                if mime.startswith("text/"):
                    output["data"][mime] = redact("".join(value), rules)
            outputs.append(output)
        if "outputs" in cell:
            cell["outputs"] = outputs
    return notebook


def describe_run(record: dict, started: datetime | None, seconds: float | None) -> str:
    """One sentence: which run a page shows."""
    run = record.get("run", {})
    parts = []
    if run.get("commit"):
        parts.append(f"commit `{run['commit']}`" + (" (with local changes)" if run["commit"].endswith("+") else ""))
    if started:
        parts.append(f"run on {started:%Y-%m-%d %H:%M} UTC")
    machine = f"{run['cpu_cores']} CPU cores" if run.get("cpu_cores") else "a machine"
    gpus = run.get("gpus")
    machine += ", no GPU" if gpus == 0 else f", {gpus} GPU(s)" if gpus else ""
    parts.append(f"on {machine}")
    sources = {"standin": "the stand-ins (offline)", "real": "the real sources"}.get(run.get("sources"), "")
    if sources:
        parts.append(f"with {sources}")
    if run.get("size"):
        parts.append(f"at the {run['size']} size")
    if seconds is not None:
        parts.append(f"in {minutes(seconds)}")
    if not run and started is None:
        return (
            "This page shows the executed copy of the last `make test` or `make run`; "
            "that run did not record its commit, machine or time."
        )
    return "This page shows the run of " + ", ".join(parts) + "."


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def stage_notebook(
    notebook: dict, where: str, staged: set[str], rules, heading: str, note: str, stderr: bool = True
) -> dict:
    """Write ``notebook`` (read from an executed copy) to the staged tree at ``where``, cleaned and relinked, with
    ``note`` (under ``heading``) after its title cell."""
    notebook = clean_outputs(notebook, rules, stderr)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = relink("".join(cell["source"]), where, staged)
    text = f":::{{admonition}} {heading}\n:class: note\n{note}\n:::\n"
    banner = {"cell_type": "markdown", "id": "which-run", "metadata": {}, "source": text}
    notebook["cells"].insert(1, banner)
    target = SOURCE / where
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(notebook))
    return notebook


def title_of(notebook: dict, fallback: str) -> str:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return fallback


def landing(readme: str, pages: list[Page], missing: list[str]) -> str:
    """The README, then the run's table (what `make run` prints) and the site's table of contents."""
    rows = ["| lesson | time | headline | floor | held |", "|---|---|---|---|---|"]
    for page in pages:
        record = page.record
        figure = f"{record['headline']} {record['value']:.3f}" if record else "-"
        held = ("✓" if record["value"] >= record["floor"] else "✗") if record else "-"
        if record and not record.get("enforced", True):
            held = "not held (smoke size)" if record.get("run", {}).get("size") == "smoke" else "reported only"
        link = f"[{page.title}]({page.document}.ipynb)"
        time_ = minutes(page.seconds) if page.seconds is not None else "-"
        rows.append(f"| {link} | {time_} | {figure} | {record.get('floor', '-')} | {held} |")
    runs = {p.record.get("run", {}).get("commit") for p in pages if p.record} - {None}
    said = f" of commit `{', '.join(sorted(runs))}`" if runs else ""
    section = [
        "",
        "## The run this site shows",
        "",
        f"Every lesson below is the executed copy of the last `make test` or `make run`{said}, with its outputs "
        "as they came: nothing ran again to build this site (`make site`). Each lesson's time and headline, against "
        "the floor it must reach:",
        "",
        *rows,
    ]
    if missing:
        section += ["", "Not executed yet, so not on this site: " + ", ".join(f"`{name}`" for name in missing) + "."]
    toctrees = [
        ("Lessons", [p.document for p in pages]),
        ("Guides", [g.removesuffix(".md") for g in GUIDES]),
        ("Solutions", [f"solutions/{p.document.split('/')[-1]}" for p in pages]),
    ]
    for caption, documents in toctrees:
        section += ["", "```{toctree}", ":hidden:", f":caption: {caption}", "", *documents, "```"]
    return readme.rstrip() + "\n" + "\n".join(section) + "\n"


def stage() -> tuple[list[Page], list[str]]:
    """Copy what the site shows into SOURCE; return the lessons on it and those not executed yet."""
    shutil.rmtree(SOURCE, ignore_errors=True)
    SOURCE.mkdir(parents=True)
    rules = redactions()
    found = {lesson.notebook: newest_copy(f"{lesson.notebook}.ipynb", LESSON_COPIES) for lesson in LESSONS}
    missing = [f"{name}.ipynb" for name, path in found.items() if path is None]
    staged = {"index.md", *GUIDES}
    staged |= {f"notebooks/{name}.ipynb" for name, path in found.items() if path}
    staged |= {f"solutions/{name}.ipynb" for name, path in found.items() if path}
    pages = []
    for name, path in found.items():
        if path is None:
            continue
        notebook = json.loads(path.read_text())
        started, seconds = run_times(notebook)
        record = results.read(name)
        said = describe_run(record, started, seconds)
        notebook = stage_notebook(notebook, f"notebooks/{name}.ipynb", staged, rules, "The run on this page", said)
        pages.append(Page(f"notebooks/{name}", title_of(notebook, name), seconds, record))
        solution = newest_copy(f"{name}.ipynb", SOLUTION_COPIES) or ROOT / "solutions" / f"{name}.ipynb"
        note = (
            "The exercises of this lesson, solved: try them in the lesson first, where each check says what it wants. "
            "The lesson's page shows the run; here Ray's log lines (stderr) are left out."
        )
        solved = json.loads(solution.read_text())
        stage_notebook(solved, f"solutions/{name}.ipynb", staged, rules, "Solutions", note, stderr=False)
    for guide in GUIDES:
        (SOURCE / guide).parent.mkdir(parents=True, exist_ok=True)
        (SOURCE / guide).write_text(relink((ROOT / guide).read_text(), guide, staged))
    readme = relink((ROOT / "README.md").read_text(), "README.md", staged)
    (SOURCE / "index.md").write_text(landing(readme, pages, missing))
    return pages, missing


def build() -> int:
    """Stage, render with Sphinx into SITE, and print what was built."""
    started = time.monotonic()
    pages, missing = stage()
    if not pages:
        print("no executed lessons in results/: run `make test` or `make run` first, then `make site`")
        return 1
    shutil.rmtree(SITE, ignore_errors=True)
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-c", str(ROOT / "site")]
    done = subprocess.run([*command, "-d", str(RESULTS_DIR / "site-doctrees"), str(SOURCE), str(SITE)])
    if done.returncode:
        print("Sphinx stopped on the warnings above (make site treats them as errors: a broken link, a missing page)")
        return done.returncode
    size = sum(path.stat().st_size for path in SITE.rglob("*") if path.is_file())
    print(
        f"built the site in {time.monotonic() - started:.0f} s: {len(pages)} lessons with their outputs, "
        f"{size / 1e6:.1f} MB in {SITE}" + (f"; not executed yet, so left out: {', '.join(missing)}" if missing else "")
    )
    print(f"open {SITE / 'index.html'}, or: python -m http.server -d {SITE} -b 127.0.0.1")
    return 0


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    return build()


if __name__ == "__main__":
    raise SystemExit(main())
