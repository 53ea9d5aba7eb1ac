"""What every worker process of the course's jobs does first: the job's runtime env names :func:`setup_worker` as its
``worker_process_setup_hook``. Kept apart from the other modules so that every worker imports only this small module
(and ``course.internals``, which imports no library at its top, and ``course.settings``: the standard library only).

* **Ray Train's info lines stay out of the notebook** (unless ``COURSE_VERBOSE=1``): "Checkpoint successfully created
  at ...", "Moving model to device", "Wrapping provided model in DistributedDataParallel". Its warnings and errors still
  show. The level travels in the job's env (:data:`TRAIN_LOG_LEVEL_ENV`).
* **On this machine, servers listen on 127.0.0.1** (:data:`LOOPBACK_ONLY_ENV` is ``1``): a Ray Serve 2.60 replica
  starts a gRPC server for calls between deployments on ``[::]:0`` (every interface), with no setting for the address;
  :func:`keep_servers_on_loopback` binds such servers to 127.0.0.1. tests/lessons/test_serve.py lists the listening
  sockets while notebook 06 serves; tests/unit/test_worker_setup.py tells when a Ray release no longer needs this.
* **A cancelled task stops cleanly**: SIGINT raises KeyboardInterrupt where the worker inherited it ignored
  (``internals.interrupt_on_sigint``).
"""

from __future__ import annotations

import logging
import re

from course import internals, settings

TRAIN_LOG_LEVEL_ENV = "COURSE_RAY_TRAIN_LOG_LEVEL"  # the level of the `ray.train` loggers in a worker
LOOPBACK_ONLY_ENV = "COURSE_LOOPBACK_ONLY"  # "1": the job runs on this machine, its servers on 127.0.0.1 only
EVERY_INTERFACE = re.compile(r"^(\[::\]|0\.0\.0\.0|\[::0\]):(\d+)$")


def on_loopback(address: str) -> str:
    """``address`` with an every-interface host (``[::]:0``, ``0.0.0.0:0``) replaced by 127.0.0.1."""
    found = EVERY_INTERFACE.match(address)
    return f"127.0.0.1:{found.group(2)}" if found else address


def keep_servers_on_loopback() -> None:
    """In this worker process, gRPC servers that Ray binds to every interface bind to 127.0.0.1 instead."""
    internals.rewrite_grpc_server_addresses(on_loopback)


def setup_worker() -> None:
    """The start of every worker process of the course's jobs: Ray Train's log level, SIGINT as Ray's task cancel
    expects it, and loopback on this machine."""
    internals.interrupt_on_sigint()
    level = settings.read(TRAIN_LOG_LEVEL_ENV)
    if level:
        logging.getLogger("ray.train").setLevel(level)
    if settings.flag(LOOPBACK_ONLY_ENV):
        keep_servers_on_loopback()
