"""Ports for tests that start a server or point a client at nothing: free ones, on loopback."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the OS picks it; free until someone binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def listeners(processes) -> list[tuple[str, int, str, int]]:
    """``(name, pid, ip, port)`` of every socket that one of ``processes`` listens on (ended ones are skipped)."""
    import psutil

    found = []
    for process in processes:
        try:
            connections = process.net_connections(kind="inet")
            name = process.name()
        except psutil.Error:
            continue
        found += [(name, process.pid, c.laddr.ip, c.laddr.port) for c in connections if c.status == psutil.CONN_LISTEN]
    return found


def beyond_loopback(found: list[tuple[str, int, str, int]]) -> list[str]:
    """Of :func:`listeners`' findings, those not on loopback, as ``name (pid) ip:port``."""
    return [f"{name} ({pid}) {ip}:{port}" for name, pid, ip, port in found if ip not in LOOPBACK]


def listening_beyond_loopback(word: str = "ray") -> list[str]:
    """Every socket that listens beyond loopback, of the processes whose name or command line holds ``word`` (Ray's
    processes and workers, by default)."""
    import psutil

    processes = []
    for process in psutil.process_iter(["name", "cmdline"]):
        text = (process.info["name"] or "") + " " + " ".join(process.info["cmdline"] or [])
        if word in text.lower():
            processes.append(process)
    return beyond_loopback(listeners(processes))
