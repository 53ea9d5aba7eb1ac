"""helpers.loopback: the servers Ray's workers start bind to 127.0.0.1 when Ray runs on this machine.

What a running notebook 06 listens on is checked in tests/test_serve.py; here, the rewrite itself, and the reason for
it in Ray's code (when a Ray release binds its replicas' server to their host, this says the module may go).
"""

from __future__ import annotations

import inspect

import pytest
import ray.serve._private.replica
from ray._common import tls_utils

from helpers import loopback
from helpers.cluster import LOOPBACK_HOOK, job_runtime_env


def test_every_interface_becomes_loopback_and_nothing_else_changes():
    assert loopback.on_loopback("[::]:0") == "127.0.0.1:0"
    assert loopback.on_loopback("0.0.0.0:9000") == "127.0.0.1:9000"
    assert loopback.on_loopback("10.0.0.5:9000") == "10.0.0.5:9000"
    assert loopback.on_loopback("127.0.0.1:0") == "127.0.0.1:0"


def test_the_hook_rewrites_the_address_ray_binds(monkeypatch: pytest.MonkeyPatch):
    bound = []
    monkeypatch.setattr(tls_utils, "add_port_to_grpc_server", lambda server, address: bound.append(address) or 1)
    loopback.keep_servers_on_loopback()
    loopback.keep_servers_on_loopback()  # twice in one process: wrapped once
    assert tls_utils.add_port_to_grpc_server(None, "[::]:0") == 1
    assert bound == ["127.0.0.1:0"]


def test_the_job_runs_the_hook_on_this_machine_only(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6389")
    assert job_runtime_env()["worker_process_setup_hook"] == LOOPBACK_HOOK
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert "worker_process_setup_hook" not in job_runtime_env(), "on a real cluster, nodes talk over the network"


def test_ray_serve_replicas_still_bind_every_interface():
    """The reason for helpers.loopback. If this fails, Ray binds the replicas' server elsewhere now."""
    source = inspect.getsource(ray.serve._private.replica)
    assert 'add_port_to_grpc_server(self._server, "[::]:0")' in source, (
        "Ray Serve's replica no longer binds its gRPC server to [::]:0: helpers.loopback may be unneeded "
        "(tests/test_serve.py's loopback check says whether nothing listens beyond 127.0.0.1 without it)"
    )
    assert "from ray._common.tls_utils import add_port_to_grpc_server" in source
