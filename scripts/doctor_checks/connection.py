"""Reaching the cluster: whether anything answers at ``RAY_ADDRESS``, attaching to it within a time limit, its live
nodes, and the answers of tasks on them, each within a time limit (a busy or broken cluster gives a ✗, never a hang)."""

from __future__ import annotations

import logging
import os
import re
import socket

import ray

from course.cluster import init_ray
from course.deadline import Late, within

TASK_TIMEOUT_S = 60  # for the tasks on the nodes: a cold worker imports torch in about 10 s
CONNECT_TIMEOUT_S = 5


def address_problem(address: str | None, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why nothing can be reached at ``RAY_ADDRESS`` (None when something answers, or when it is unset/auto)."""
    if not address or address == "auto":
        return None
    host_port = re.sub(r"^\w+://", "", address).rsplit("/", 1)[0]
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        return f"RAY_ADDRESS={address!r} is not host:port (for example 127.0.0.1:6379)"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as error:
        return f"nothing answers at RAY_ADDRESS={address} ({error.strerror or error})"


def connect(timeout: float) -> dict[str, float]:
    """``init_ray()``; attaching to a cluster has a time limit (one that accepts the connection but never answers)."""
    logging.getLogger("ray").setLevel(logging.ERROR)  # the table is the output
    if not os.environ.get("RAY_ADDRESS"):  # a local Ray starts in this (the main) thread
        return init_ray(require_shared=False)
    try:  # the storage and sources rows below say which node misses what, with the fix
        return within(init_ray, require_shared=False, limit_s=timeout)
    except Late:
        raise TimeoutError(f"Ray did not answer within {timeout:.0f} s") from None


def alive_nodes() -> list[dict]:
    return sorted((n for n in ray.nodes() if n["Alive"]), key=lambda n: not n.get("IsHeadNode", False))


def gather(refs: list, timeout: float = TASK_TIMEOUT_S) -> list:
    """The results of ``refs``; for a task that failed its error, for one not done within ``timeout`` a TimeoutError."""
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    results = []
    for ref in refs:
        if ref not in ready:
            ray.cancel(ref, force=True)
            results.append(TimeoutError(f"no answer within {timeout:.0f} s"))
            continue
        try:
            results.append(ray.get(ref))
        except Exception as error:  # a node without the course installed, for example
            results.append(error)
    return results


def names_of(nodes: list[dict]) -> list[str]:
    return [n["NodeID"] for n in nodes]
