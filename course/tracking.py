"""Where the training lessons log their MLflow runs, and whether that place answers, in one place.

One setting says where (``COURSE_TRACKING_URI``, declared in :mod:`course.settings`); ``MLFLOW_TRACKING_URI``, set by
you, wins over it, as it does for every MLflow program. Unset, the runs go to a SQLite store in the course's results
folder (``results/mlflow/mlflow.db``, its artifacts beside it), which needs no server. On the course's local cluster
(``scripts/with-ray-cluster.sh``: ``make lab``, ``make run``, ``make test``) the script starts a tracking server on
127.0.0.1 and sets ``COURSE_TRACKING_URI`` to it, since a worker node of a real cluster shares no files with this
machine. :func:`course.cluster.job_env_vars` passes the resolved URI to every Ray worker as ``MLFLOW_TRACKING_URI``.

MLflow is imported only where a run is logged or read (about 1 s in a process that has torch and Ray already, 3 s
alone, on 2 cores): this module imports it inside its functions, and the lessons on rank 0 only.
"""

from __future__ import annotations

import logging
import os
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from course import config, settings

TRACKING_ENV = "COURSE_TRACKING_URI"
MLFLOW_ENV = "MLFLOW_TRACKING_URI"  # MLflow's own variable: set by you, it wins
STORE_FOLDER = "mlflow"  # under the results folder: the default store and its artifacts
REACH_TIMEOUT_S = 3.0  # a server that does not answer /health in this time is taken as unreachable
# MLflow's HTTP client retries a failed request 7 times with a growing back-off (minutes): a server that goes away in
# the middle of a lesson would hang its cell. Two tries, 10 s each, at most (every worker gets these too).
QUIET_CLIENT = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
# MLflow's info lines go to stderr ("Creating initial MLflow database tables..." as a SQLite store is made, the store's
# migrations): warnings only, unless COURSE_VERBOSE=1. Every Ray worker gets it (course.cluster.QUIET_WORKERS).
QUIET_LOGS = {"MLFLOW_LOGGING_LEVEL": "WARNING"}


def store_folder() -> Path:
    """The default store's folder: ``mlflow/`` in the results folder."""
    return config.RESULTS_DIR / STORE_FOLDER


def default_uri() -> str:
    """The store that needs no server: a SQLite file in :func:`store_folder`."""
    return f"sqlite:///{store_folder() / 'mlflow.db'}"


def tracking_uri(environ: dict[str, str] | None = None) -> str:
    """Where runs go: ``$MLFLOW_TRACKING_URI`` if set (yours wins), else ``$COURSE_TRACKING_URI``, else
    :func:`default_uri`. A wrong ``COURSE_TRACKING_URI`` is a ValueError that names the fix."""
    environ = os.environ if environ is None else environ
    return environ.get(MLFLOW_ENV, "").strip() or settings.read(TRACKING_ENV, environ=environ) or default_uri()


def artifact_location(uri: str, experiment: str) -> str | None:
    """Where an experiment created on a store of this machine keeps its artifacts (MLflow's own default is
    ``./mlruns`` in the working directory, beside the notebook); a server keeps them where it was told (None)."""
    if not uri.startswith(("sqlite:///", "file://")):
        return None
    return (store_folder() / "artifacts" / experiment).as_uri()


def problem(uri: str, timeout_s: float = REACH_TIMEOUT_S) -> str | None:
    """Why runs cannot be logged at ``uri`` (a server that does not answer in ``timeout_s``, a store whose folder
    cannot be written), or None."""
    scheme = urlparse(uri).scheme
    if scheme in ("http", "https"):
        try:
            with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout_s) as answer:
                return None if answer.status == 200 else f"{uri} answered {answer.status}"
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            return f"no tracking server answers at {uri} ({reason})"
    if scheme in ("sqlite", "file"):
        path = Path(urlparse(uri).path)
        folder = path.parent if scheme == "sqlite" else path
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return f"cannot write the store's folder {folder} ({error.strerror})"
        return None if os.access(folder, os.W_OK) else f"cannot write the store's folder {folder}"
    return None  # another MLflow store (databricks...): MLflow itself says what is wrong


def connect(experiment: str, uri: str | None = None) -> str | None:
    """Log this process's runs to ``uri`` (default :func:`tracking_uri`) under ``experiment``: returns the URI, for
    the training function's config. Where nothing answers there, one line says why and names the setting, and the
    lesson goes on without tracking: returns None."""
    uri = uri or tracking_uri()
    why = problem(uri)
    if why is not None:
        print(
            f"MLflow tracking is off for this run: {why}. Start that server, or set {TRACKING_ENV} (or "
            f"{MLFLOW_ENV}) to one that runs; unset both for the store in {store_folder()}."
        )
        return None
    quiet = {} if config.verbose() else QUIET_LOGS
    for name, value in (QUIET_CLIENT | quiet).items():
        os.environ.setdefault(name, value)
    import mlflow  # here, not at the top: a process that tracks nothing never pays for it

    if quiet:  # MLflow set its logger's level as it was imported, maybe before this (notebook 01 imports it first)
        logging.getLogger("mlflow").setLevel(logging.WARNING)

    mlflow.set_tracking_uri(uri)
    if mlflow.get_experiment_by_name(experiment) is None:
        mlflow.create_experiment(experiment, artifact_location=artifact_location(uri, experiment))
    mlflow.set_experiment(experiment)
    return uri


def worker_env() -> dict[str, str]:
    """What every Ray worker gets (:func:`course.cluster.job_env_vars`): the resolved URI as MLflow's own variable, and
    a client that does not hang on a server that went away."""
    return {MLFLOW_ENV: tracking_uri()} | QUIET_CLIENT
