"""scripts/build_site.py's parts: which copy a page shows, what it says of the run, what it leaves out."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import build_site  # noqa: E402


def test_the_newest_executed_copy_is_the_one_shown(tmp_path):
    older, newer = tmp_path / "browser", tmp_path / "executed"
    for folder in (older, newer):
        folder.mkdir()
        (folder / "02.ipynb").write_text("{}")
    past = time.time() - 60
    os.utime(older / "02.ipynb", (past, past))
    assert build_site.newest_copy("02.ipynb", [older, newer]) == newer / "02.ipynb"
    assert build_site.newest_copy("03.ipynb", [older, newer]) is None


def test_a_lessons_time_runs_from_its_first_cell_to_its_last():
    def cell(start: str, end: str) -> dict:
        return {"metadata": {"execution": {"iopub.execute_input": start, "shell.execute_reply": end}}}

    notebook = {"cells": [cell("2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z"), {"metadata": {}}]}
    notebook["cells"].append(cell("2026-11-28T10:01:00Z", "2026-11-28T10:02:30Z"))
    started, seconds = build_site.run_times(notebook)
    assert started.isoformat() == "2026-11-28T10:00:00+00:00" and seconds == 150
    assert build_site.run_times({"cells": [{"metadata": {}}]}) == (None, None)


def test_links_between_pages_stay_and_links_to_other_files_become_their_text():
    staged = {"index.md", "docs/instructors.md", "notebooks/00_ray_core.ipynb"}
    text = "[guide](instructors.md#the-room), [lesson](../notebooks/00_ray_core.ipynb#glossary), [code](../course/x.py)"
    assert build_site.relink(text, "docs/development.md", staged) == (
        "[guide](instructors.md#the-room), [lesson](../notebooks/00_ray_core.ipynb#glossary), code"
    )
    assert build_site.relink("[home](../README.md)", "docs/instructors.md", staged) == "[home](../index.md)"
    kept = "[Ray](https://docs.ray.io), [up](#start), ![plot](plot.png)"
    assert build_site.relink(kept, "README.md", staged) == kept


def test_the_machines_paths_and_rays_token_are_left_out(tmp_path):
    (tmp_path / ".cluster").mkdir()
    (tmp_path / ".cluster" / "auth_token").write_text("s3cr3t-token\n")
    rules = build_site.redactions(tmp_path)
    text = f"{tmp_path}/results and {tempfile.gettempdir()}/ray-course-0-1/x, token s3cr3t-token, {Path.home()}/.cache"
    assert build_site.redact(text, rules) == "<course>/results and <temp>, token <token>, ~/.cache"


def test_progress_bars_and_on_request_stderr_leave_the_copy():
    widget = {"output_type": "display_data", "data": {build_site.WIDGET: {}, "text/plain": "0%|"}}
    stderr = {"output_type": "stream", "name": "stderr", "text": "a Ray log line\n"}
    stdout = {"output_type": "stream", "name": "stdout", "text": ["✓ exercise 02.1: ", "right\n"]}
    notebook = {"metadata": {"widgets": {}}, "cells": [{"cell_type": "code", "outputs": [widget, stderr, stdout]}]}
    cleaned = build_site.clean_outputs(notebook, [], stderr=False)
    assert "widgets" not in cleaned["metadata"]
    assert cleaned["cells"][0]["outputs"] == [stdout | {"text": "✓ exercise 02.1: right\n"}]


def test_a_page_says_which_run_it_shows():
    record = {"run": {"commit": "abc1234", "cpu_cores": 2, "gpus": 0, "sources": "standin", "size": "course"}}
    said = build_site.describe_run(record, datetime(2026, 11, 28, 10, 0), 150)
    assert said == (
        "This page shows the run of commit `abc1234`, run on 2026-11-28 10:00 UTC, on 2 CPU cores, no GPU, "
        "with the stand-ins (offline), at the course size, in 2.5 min."
    )
    assert "did not record" in build_site.describe_run({}, None, None)
