"""Who listens where: the listening sockets of the course's processes, and those beyond loopback. (A free port for
a test's server is the course's own, ``course.distributed.free_loopback_port``; for a test's own cluster,
:func:`free_cluster_port`.)"""

from __future__ import annotations

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
    """Every socket that listens beyond loopback, of the course's processes (:func:`course_processes`) whose name or
    command line holds ``word`` (Ray's processes and workers, by default). Another Ray on this machine, a learner's or
    another checkout's, is not the course's: what it does is no finding of a test."""
    import psutil

    ours, processes = course_processes(), []
    for process in psutil.process_iter(["name", "cmdline"]):
        text = (process.info["name"] or "") + " " + " ".join(process.info["cmdline"] or [])
        if process.pid in ours and word in text.lower():
            processes.append(process)
    return beyond_loopback(listeners(processes))


def free_cluster_port(preferred: int) -> int:
    """A ``COURSE_RAY_PORT`` for a test's own cluster (scripts/with-ray-cluster.sh, which takes that port and the next
    one): ``preferred`` where both are free on 127.0.0.1, else another such pair among the course's chosen ports
    (``course.distributed.CHOSEN_PORTS``, which the OS never hands out). A fixed port may be held by whatever else
    runs on the machine (another checkout's tests, a learner's cluster); the preferred one keeps the cluster's temp
    folder and logs the same from run to run."""
    import random
    import socket

    from course.distributed import CHOSEN_PORTS

    def free(port: int) -> bool:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the script judges: TIME_WAIT is free
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
            return True

    for port in [preferred, *random.SystemRandom().sample(CHOSEN_PORTS[:-1], 100)]:
        if free(port) and free(port + 1):
            return port
    raise RuntimeError(
        f"no two free ports side by side on 127.0.0.1 between {min(CHOSEN_PORTS)} and {max(CHOSEN_PORTS)}"
    )


# The local cluster's temp folder, exported by scripts/with-ray-cluster.sh: every process of the cluster names it in its
# command line, or descends from one that does
CLUSTER_TEMP_DIR_ENV = "COURSE_RAY_TEMP_DIR"


def course_processes() -> set[int]:
    """The pids of what a course run started: this process's descendants (the notebooks' kernels, JupyterLab, a Ray
    started in a kernel) and the local cluster's processes (those naming its temp folder, and their descendants)."""
    import os

    import psutil

    from course import settings

    folder = settings.read(CLUSTER_TEMP_DIR_ENV)
    roots, children = {os.getpid()}, {}
    for process in psutil.process_iter(["ppid", "cmdline"]):
        if folder and folder in " ".join(process.info["cmdline"] or []):
            roots.add(process.pid)
        children.setdefault(process.info["ppid"], []).append(process.pid)
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def course_listeners_beyond_loopback() -> list[str]:
    """Every socket a process of the course (:func:`course_processes`) listens on beyond loopback now, as
    ``name (pid) ip:port: command line``. One system-wide pass, cheap enough for every second."""
    import psutil

    wide = [
        c
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.laddr.ip not in LOOPBACK and c.pid
    ]
    if not wide:
        return []
    ours, found = course_processes(), []
    for c in wide:
        if c.pid not in ours:
            continue
        try:
            process = psutil.Process(c.pid)
            name, text = process.name(), " ".join(process.cmdline())
        except psutil.Error:
            continue
        found.append(f"{name} ({c.pid}) {c.laddr.ip}:{c.laddr.port}: {text[:120]}")
    return found


class SocketWatch:
    """While a notebook runs, samples the course's listening sockets every ``interval`` seconds (in a thread) and keeps
    each one seen beyond loopback: ``with SocketWatch("05_data_loading_playbook") as watch: ...``, then
    ``watch.problems()``. A listener that lives for less than ``interval`` can be missed; Ray Train's and the libraries'
    servers live as long as a training run."""

    def __init__(self, notebook: str, interval: float = 1.0) -> None:
        import threading

        self.notebook, self.interval = notebook, interval
        self.seen: dict[str, None] = {}  # insertion-ordered, each listener once
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name=f"socket-watch {notebook}", daemon=True)

    def _sample(self) -> None:
        while True:
            for found in course_listeners_beyond_loopback():
                self.seen.setdefault(found, None)
            self.samples += 1
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> SocketWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def problems(self) -> list[str]:
        """Each listener seen beyond loopback, naming the notebook and the process."""
        return [f"{self.notebook}: listening beyond 127.0.0.1: {found}" for found in self.seen]
