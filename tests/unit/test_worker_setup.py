"""course.worker_setup: every worker of the course's jobs quiets Ray Train's info lines and, when Ray runs on this
machine, binds the servers it starts to 127.0.0.1.

What a running notebook 06 listens on is checked in tests/lessons/test_serve.py, and what notebooks show in
tests/lessons/test_notebooks.py; here, the hook itself, and the reason for the loopback rewrite in Ray's code (when a
Ray release binds its replicas' server to their host, this says that part may go)."""

from __future__ import annotations

import inspect
import logging

import pytest
import ray.serve._private.replica
from ray._common import tls_utils

from course import worker_setup
from course.cluster import FREED_MEMORY_RETURNED, WORKER_SETUP_HOOK, job_runtime_env


def test_every_interface_becomes_loopback_and_nothing_else_changes():
    assert worker_setup.on_loopback("[::]:0") == "127.0.0.1:0"
    assert worker_setup.on_loopback("0.0.0.0:9000") == "127.0.0.1:9000"
    assert worker_setup.on_loopback("10.0.0.5:9000") == "10.0.0.5:9000"
    assert worker_setup.on_loopback("127.0.0.1:0") == "127.0.0.1:0"


def test_the_hook_rewrites_the_address_ray_binds(monkeypatch: pytest.MonkeyPatch):
    bound = []
    monkeypatch.setattr(tls_utils, "add_port_to_grpc_server", lambda server, address: bound.append(address) or 1)
    worker_setup.keep_servers_on_loopback()
    worker_setup.keep_servers_on_loopback()  # twice in one process: wrapped once
    assert tls_utils.add_port_to_grpc_server(None, "[::]:0") == 1
    assert bound == ["127.0.0.1:0"]


def test_the_job_keeps_servers_on_loopback_on_this_machine_only(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(worker_setup.LOOPBACK_ONLY_ENV, raising=False)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6389")
    env = job_runtime_env()
    assert env["worker_process_setup_hook"] == WORKER_SETUP_HOOK
    assert env["env_vars"][worker_setup.LOOPBACK_ONLY_ENV] == "1"
    assert FREED_MEMORY_RETURNED.items() <= env["env_vars"].items(), "a laptop's workers give freed memory back"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    env = job_runtime_env()
    assert env["worker_process_setup_hook"] == WORKER_SETUP_HOOK
    assert worker_setup.LOOPBACK_ONLY_ENV not in env["env_vars"], "on a real cluster, nodes talk over the network"
    assert not FREED_MEMORY_RETURNED.keys() & env["env_vars"].keys(), "a cluster's nodes keep their own allocators"


def test_the_hook_sets_ray_trains_level_and_binds_on_loopback_only_when_told(monkeypatch: pytest.MonkeyPatch):
    train = logging.getLogger("ray.train")
    monkeypatch.setattr(train, "level", train.level)  # restored afterwards
    rewritten = []
    monkeypatch.setattr(worker_setup, "keep_servers_on_loopback", lambda: rewritten.append(True))
    monkeypatch.delenv(worker_setup.LOOPBACK_ONLY_ENV, raising=False)
    monkeypatch.setenv(worker_setup.TRAIN_LOG_LEVEL_ENV, "WARNING")
    worker_setup.setup_worker()
    assert logging.getLogger("ray.train.v2.torch.train_loop_utils").getEffectiveLevel() == logging.WARNING
    assert not rewritten
    monkeypatch.setenv(worker_setup.LOOPBACK_ONLY_ENV, "1")
    worker_setup.setup_worker()
    assert rewritten == [True]


def test_verbose_keeps_ray_trains_info_lines(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COURSE_VERBOSE", "1")
    assert worker_setup.TRAIN_LOG_LEVEL_ENV not in job_runtime_env()["env_vars"]
    monkeypatch.delenv("COURSE_VERBOSE")
    assert job_runtime_env()["env_vars"][worker_setup.TRAIN_LOG_LEVEL_ENV] == "WARNING"


def test_ray_serve_replicas_still_bind_every_interface():
    """The reason for the loopback rewrite. If this fails, Ray binds the replicas' server elsewhere now."""
    source = inspect.getsource(ray.serve._private.replica)
    assert 'add_port_to_grpc_server(self._server, "[::]:0")' in source, (
        "Ray Serve's replica no longer binds its gRPC server to [::]:0: worker_setup's rewrite may be unneeded "
        "(tests/lessons/test_serve.py's loopback check says whether nothing listens beyond 127.0.0.1 without it)"
    )
    assert "from ray._common.tls_utils import add_port_to_grpc_server" in source
