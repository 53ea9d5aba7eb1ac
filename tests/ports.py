"""Ports for tests that start a server or point a client at nothing: free ones, on loopback."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the OS picks it; free until someone binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def listening_beyond_loopback(word: str = "ray") -> list[str]:
    """``name (pid) ip:port`` of every socket that listens beyond loopback, of processes whose name or command line
    holds ``word`` (Ray's processes and workers, by default)."""
    import psutil

    found = []
    for connection in psutil.net_connections(kind="inet"):
        if connection.status != psutil.CONN_LISTEN or connection.laddr.ip in LOOPBACK or connection.pid is None:
            continue
        try:
            process = psutil.Process(connection.pid)
            text = process.name() + " " + " ".join(process.cmdline())
        except psutil.Error:
            continue
        if word in text.lower():
            found.append(f"{process.name()} ({connection.pid}) {connection.laddr.ip}:{connection.laddr.port}")
    return found
