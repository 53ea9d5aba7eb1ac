"""MLflow's UI as a learner opens it after the lessons ran (tests/browser/test_browser.py): notebook 07's trials in
its experiment's runs table, and notebook 02's evaluations, one point each, in its run's metric charts.

The runs to look for are read from the same server's REST API (what the lessons logged); the UI must then show them.
"""

from __future__ import annotations

import json
import re
import urllib.request

# scripts/with-ray-cluster.sh's line, or `make lab`'s own where it attaches to a cluster already up (RAY_ADDRESS)
UI_LINE = re.compile(r"MLflow's (?:tracking server and )?UI: (http://127\.0\.0\.1:\d+)")
TRIALS_EXPERIMENT, TRIALS_PREFIX = "07-asha", "train_trial"  # notebook 07's MLflowLoggerCallback: str(trial)
BEANS_EXPERIMENT, RAY_TRAIN_LESSON = "beans", "02_ray_train_finetune"
WAIT_MS = 60_000


def ui_address(log: str) -> str | None:
    """The UI's address that the cluster script printed as it started (``make lab``'s log), or None."""
    found = UI_LINE.search(log)
    return found.group(1) if found else None


def api(base: str, path: str, body: dict | None = None) -> dict:
    """One call of MLflow's REST API on ``base`` (GET, or POST with ``body``)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}/ajax-api/2.0/mlflow/{path}", data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def newest_runs(base: str, experiment: str, tag_filter: str = "") -> tuple[str, list[dict]]:
    """The id of ``experiment`` and its runs, newest first (``tag_filter``: an MLflow filter string)."""
    experiment_id = api(base, f"experiments/get-by-name?experiment_name={experiment}")["experiment"]["experiment_id"]
    search = {"experiment_ids": [experiment_id], "order_by": ["attributes.start_time DESC"], "filter": tag_filter}
    return experiment_id, api(base, "runs/search", search).get("runs", [])


def ui_problems(page, base: str) -> list[str]:
    """What the UI at ``base`` fails to show, opened in the Playwright ``page``: 07's trials, 02's evaluations."""
    problems = []
    try:
        experiment_id, runs = newest_runs(base, TRIALS_EXPERIMENT)
        trials = [run["info"]["run_name"] for run in runs if run["info"]["run_name"].startswith(TRIALS_PREFIX)]
        if not trials:
            problems.append(f"no trial runs in the experiment {TRIALS_EXPERIMENT} (notebook 07's)")
        page.goto(f"{base}/#/experiments/{experiment_id}/runs")
        page.get_by_text(TRIALS_PREFIX).first.wait_for(timeout=WAIT_MS)
        unseen = [name for name in trials[:10] if not page.get_by_text(name).count()]
        if unseen:
            problems.append(f"the runs table of {TRIALS_EXPERIMENT} does not show the trials {unseen}")
    except Exception as error:  # an experiment missing, a page that never shows: one line, not a traceback
        problems.append(f"07's trials in MLflow's UI: {type(error).__name__}: {str(error).splitlines()[0]}")
    try:
        experiment_id, runs = newest_runs(base, BEANS_EXPERIMENT, f"tags.lesson = '{RAY_TRAIN_LESSON}'")
        if not runs:
            return problems + [f"no run of {RAY_TRAIN_LESSON} in the experiment {BEANS_EXPERIMENT}"]
        run_id = runs[0]["info"]["run_id"]
        history = api(base, f"metrics/get-history?run_id={run_id}&metric_key=eval_accuracy").get("metrics", [])
        if not history:
            return problems + [f"02's newest run logged no eval_accuracy ({base}, run {run_id})"]
        page.goto(f"{base}/#/experiments/{experiment_id}/runs/{run_id}/model-metrics")
        page.get_by_text("eval_accuracy").first.wait_for(timeout=WAIT_MS)
        page.locator(".js-plotly-plot .point").first.wait_for(timeout=WAIT_MS)
        points = page.locator(".js-plotly-plot .point").count()
        if points < len(history):
            problems.append(f"02's run shows {points} points in its charts for {len(history)} evaluations logged")
    except Exception as error:
        problems.append(f"02's evaluations in MLflow's UI: {type(error).__name__}: {str(error).splitlines()[0]}")
    return problems
