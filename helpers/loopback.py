"""What Ray's worker processes listen on when Ray runs on this machine: 127.0.0.1, not every interface.

A Ray Serve 2.60 replica starts a gRPC server for calls between deployments on ``[::]:0`` (every interface), with no
setting for the address. :func:`keep_servers_on_loopback` runs first in every worker process of the course's jobs on
this machine (the job's runtime env names it as ``worker_process_setup_hook``) and binds such servers to 127.0.0.1.
Kept apart from the other helpers so that every worker imports only this small module at start-up.
tests/test_serve.py lists the listening sockets while notebook 06 serves; tests/test_loopback.py tells when a
Ray release no longer needs this.
"""

from __future__ import annotations

import re
import sys

EVERY_INTERFACE = re.compile(r"^(\[::\]|0\.0\.0\.0|\[::0\]):(\d+)$")


def on_loopback(address: str) -> str:
    """``address`` with an every-interface host (``[::]:0``, ``0.0.0.0:0``) replaced by 127.0.0.1."""
    found = EVERY_INTERFACE.match(address)
    return f"127.0.0.1:{found.group(2)}" if found else address


def keep_servers_on_loopback() -> None:
    """In this worker process, gRPC servers that Ray binds to every interface bind to 127.0.0.1 instead."""
    from ray._common import tls_utils

    if getattr(tls_utils.add_port_to_grpc_server, "keeps_loopback", False):
        return
    bind = tls_utils.add_port_to_grpc_server

    def add_port_on_loopback(server, address: str):
        return bind(server, on_loopback(address))

    add_port_on_loopback.keeps_loopback = True
    tls_utils.add_port_to_grpc_server = add_port_on_loopback
    replica = sys.modules.get("ray.serve._private.replica")  # imported already: it holds its own reference
    if replica is not None:
        replica.add_port_to_grpc_server = add_port_on_loopback
