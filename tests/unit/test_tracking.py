"""Where MLflow runs go (course.tracking): one setting, MLflow's own variable winning over it, a store that needs no
server by default, one line and no hang where nothing answers, and the resolved URI passed to every Ray worker."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import pytest

from course import cluster, config, tracking


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A results folder of the test's own: the default store lives there, and goes with the test. Neither tracking
    variable is set, as on a machine without the course's cluster (under make test, the cluster's server is set)."""
    monkeypatch.setattr(config, "RESULTS_DIR", tmp_path)
    monkeypatch.delenv(tracking.MLFLOW_ENV, raising=False)
    monkeypatch.delenv(tracking.TRACKING_ENV, raising=False)
    return tmp_path


def test_mlflow_s_own_variable_wins_then_the_course_s_setting_then_the_store_in_the_results_folder(results):
    mine, course = "http://127.0.0.1:5999", "http://127.0.0.1:5001"
    both = {tracking.MLFLOW_ENV: mine, tracking.TRACKING_ENV: course}
    assert tracking.tracking_uri(both) == mine
    assert tracking.tracking_uri({tracking.TRACKING_ENV: course}) == course
    assert tracking.tracking_uri({}) == f"sqlite:///{results / 'mlflow' / 'mlflow.db'}"
    with pytest.raises(ValueError, match="COURSE_TRACKING_URI='mlruns' is not an MLflow tracking URI.*export"):
        tracking.tracking_uri({tracking.TRACKING_ENV: "mlruns"})


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when this returns: nothing listens there


def test_a_server_that_is_not_there_turns_tracking_off_in_one_line_that_names_the_setting(results, capsys):
    began = time.monotonic()
    assert tracking.connect("beans", f"http://127.0.0.1:{closed_port()}") is None
    assert time.monotonic() - began < tracking.REACH_TIMEOUT_S + 1
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and "tracking is off" in printed[0] and tracking.TRACKING_ENV in printed[0], printed


def test_a_server_that_answers_its_health_check_is_reachable():
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert tracking.problem(f"http://127.0.0.1:{server.server_port}") is None
    finally:
        server.shutdown()
        server.server_close()


def test_the_default_store_needs_no_server_and_keeps_its_runs_and_artifacts_in_the_results_folder(
    results, monkeypatch, capfd
):
    monkeypatch.delenv("COURSE_VERBOSE", raising=False)
    uri = tracking.connect("a-test")
    assert uri == tracking.default_uri()
    import mlflow

    with mlflow.start_run(run_name="one") as run:
        mlflow.log_metric("eval_accuracy", 0.5, step=3)
        mlflow.log_dict({"3": "/a/checkpoint"}, "checkpoints.json")
    found = mlflow.search_runs(experiment_names=["a-test"])
    assert list(found["tags.mlflow.runName"]) == ["one"] and list(found["metrics.eval_accuracy"]) == [0.5]
    assert (results / "mlflow" / "mlflow.db").is_file()
    assert mlflow.get_run(run.info.run_id).info.artifact_uri.startswith((results / "mlflow" / "artifacts").as_uri())
    assert capfd.readouterr().err == "", "MLflow's info lines (the new store's tables) stay off stderr"


def test_every_worker_gets_the_resolved_uri_as_mlflow_s_own_variable_and_a_client_that_does_not_hang(
    results, monkeypatch
):
    monkeypatch.delenv(tracking.MLFLOW_ENV, raising=False)
    monkeypatch.setenv(tracking.TRACKING_ENV, "http://127.0.0.1:5001")
    env = cluster.job_env_vars()
    assert env[tracking.MLFLOW_ENV] == "http://127.0.0.1:5001"
    assert env["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == tracking.QUIET_CLIENT["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]


def test_the_course_s_modules_leave_mlflow_unimported_until_a_run_is_logged():
    """A worker that tracks nothing (every rank but 0) never pays MLflow's import: the course's modules that every
    worker and notebook load import it only inside the functions that log or read runs."""
    import subprocess
    import sys

    probe = "import sys, course.tracking, course.cluster, course.serving; print('mlflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False", "importing the course's modules imported MLflow"
