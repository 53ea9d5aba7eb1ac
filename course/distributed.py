"""How Ray Train's workers talk to each other: on 127.0.0.1 only when the cluster is this machine.

Ray Train's default rendezvous (`TorchConfig()`) has rank 0 start torch's TCPStore, and that store listens
on every network interface (torch offers no setting for its address). On a laptop in a room of thirty on
one Wi-Fi, that is a port anyone can reach. :func:`torch_config` gives a `TorchConfig` whose rendezvous
binds the store to 127.0.0.1 itself (a socket handed to the store) and keeps the collective sockets on the
loopback interface: Gloo's on CPU workers, NCCL's bootstrap and socket transport on GPU workers
(``NCCL_SOCKET_IFNAME``). On a real cluster the workers must reach each other over the network, so there
it is Ray's own `TorchConfig()`.

XGBoost and TensorFlow have no such setting: XGBoost's workers listen for their peers on every interface
(its C++ binds ``INADDR_ANY``), and TensorFlow's collective gRPC server on ``0.0.0.0``. On this machine
:func:`collective_workers` therefore gives them one worker and :func:`xgboost_config` /
:func:`tensorflow_config` start no collective at all (no tracker connection, no ``TF_CONFIG``), so nothing
listens; on a real cluster they get every worker and Ray's own configs. tests/cluster/test_distributed.py shows
both libraries binding every interface, so that a release that adds a setting is noticed.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import ray
import torch.distributed as dist
from ray.train.backend import Backend
from ray.train.torch import TorchConfig

from course import config
from course.cluster import is_on_this_machine
from course.internals import TorchBackend, set_torch_distributed_env_vars

LOOPBACK_HOST = "127.0.0.1"


def loopback_interface() -> str:
    """The loopback interface's name: `lo` on Linux, `lo0` on macOS."""
    names = [name for _, name in socket.if_nameindex() if name.startswith("lo")]
    return min(names, key=len) if names else "lo"


# Where the course picks a port for a server it starts later (Serve's proxy, torch's store): below the ranges an OS
# hands out for outgoing connections (Linux 32768-60999, macOS and Windows 49152-65535) and above Ray's worker ports
# (10002-19999). A port the OS picks (a bind to port 0) is in that range, where any connection Ray opens meanwhile
# may take it: Serve's proxy once failed with "Failed to bind to address '127.0.0.1:40965'" (a fresh clone's test run).
CHOSEN_PORTS = range(20000, 32768)


def free_loopback_port(tries: int = 100) -> int:
    """A port in :data:`CHOSEN_PORTS` that nothing holds on 127.0.0.1 now (free until someone binds it)."""
    for port in random.SystemRandom().sample(CHOSEN_PORTS, tries):  # not the random module's state, which a seed fixes
        with socket.socket() as probe:
            try:
                probe.bind((LOOPBACK_HOST, port))
            except OSError:
                continue
            return port
    raise RuntimeError(
        f"no free port on {LOOPBACK_HOST} in {tries} tries between {min(CHOSEN_PORTS)} and {max(CHOSEN_PORTS)}: "
        f"stop what holds them, or set {config.SERVE_PORT_ENV} to a free port for Serve"
    )


def join_on_loopback(backend: str, world_rank: int, world_size: int, port: int, timeout_s: int) -> None:
    """Run on each worker: rank 0 serves the store on 127.0.0.1:``port``, every rank joins the process group.

    Gloo's pairs and NCCL's bootstrap and socket transport use the loopback interface only (NCCL's GPU-to-GPU
    transports, NVLink and PCIe, open no sockets).
    """
    interface = loopback_interface()
    os.environ.update(
        MASTER_ADDR=LOOPBACK_HOST, MASTER_PORT=str(port), GLOO_SOCKET_IFNAME=interface, NCCL_SOCKET_IFNAME=interface
    )
    if backend == "nccl":  # as Ray's own backend does: a stuck collective fails instead of hanging
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    timeout = timedelta(seconds=timeout_s)
    listen_fd = None
    if world_rank == 0:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK_HOST, port))
        listener.listen(128)
        listen_fd = listener.detach()  # the store owns the socket from here on
    # a store on the socket handed to it: an entry of course.internals (torch 2.13.0)
    store = dist.TCPStore(
        LOOPBACK_HOST, port, world_size, is_master=world_rank == 0, timeout=timeout, master_listen_fd=listen_fd
    )
    dist.init_process_group(backend=backend, store=store, rank=world_rank, world_size=world_size, timeout=timeout)


@contextlib.contextmanager
def group_of_one() -> Iterator[None]:
    """A process group of one in this process, removed after: Gloo over an in-memory store (``HashStore``), its
    socket on the loopback interface (``GLOO_SOCKET_IFNAME``; Gloo's default is the address this machine's name
    resolves to, on many laptops the LAN's). Where a group of one is there already, that one; a group of several
    ranks is refused."""
    if dist.is_initialized():
        if dist.get_world_size() != 1:
            raise AssertionError("this process is in a process group of several ranks: run this in a new kernel")
        yield
        return
    before = os.environ.get("GLOO_SOCKET_IFNAME")
    os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()
    try:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    finally:
        if before is None:
            os.environ.pop("GLOO_SOCKET_IFNAME")
        else:
            os.environ["GLOO_SOCKET_IFNAME"] = before
    try:
        yield
    finally:
        dist.destroy_process_group()


def backend_for(num_gpus_per_worker: float, asked: str | None) -> str | None:
    """The collective backend :class:`LoopbackTorchBackend` sets up itself: Gloo on CPUs, NCCL on GPUs; None (Ray's
    own rendezvous) for any other backend asked for by name."""
    backend = asked or ("nccl" if num_gpus_per_worker else "gloo")
    return backend if backend in ("gloo", "nccl") else None


class LoopbackTorchBackend(TorchBackend):
    """Ray Train's torch backend, with the rendezvous of :func:`join_on_loopback` (Gloo on CPUs, NCCL on GPUs)."""

    def on_start(self, worker_group, backend_config: TorchConfig) -> None:
        backend = backend_for(worker_group.get_resources_per_worker().get("GPU", 0), backend_config.backend)
        if backend is None:
            return super().on_start(worker_group, backend_config)
        port = free_loopback_port()
        worker_group.execute(set_torch_distributed_env_vars)  # LOCAL_RANK and friends, as Ray's backend sets
        ray.get(
            [
                worker_group.execute_single_async(
                    rank,
                    join_on_loopback,
                    backend=backend,
                    world_rank=rank,
                    world_size=len(worker_group),
                    port=port,
                    timeout_s=backend_config.timeout_s,
                )
                for rank in range(len(worker_group))
            ]
        )


@dataclass
class LoopbackTorchConfig(TorchConfig):
    @property
    def backend_cls(self):
        return LoopbackTorchBackend


def torch_config() -> TorchConfig:
    """The `TorchConfig` for a `TorchTrainer`: on 127.0.0.1 when Ray runs on this machine, Ray's default elsewhere."""
    if not is_on_this_machine(os.environ.get("RAY_ADDRESS")):
        return TorchConfig()
    return LoopbackTorchConfig()


def collective_workers(num_workers: int) -> int:
    """How many workers an XGBoost or TensorFlow trainer gets: one on this machine (see the module's docstring)."""
    return 1 if is_on_this_machine(os.environ.get("RAY_ADDRESS")) else num_workers


class NoCollectiveBackend(Backend):
    """A backend that connects nothing: a single worker trains alone, with no socket for (absent) peers."""


def xgboost_config():
    """The `xgboost_config` for an `XGBoostTrainer`: no collective on this machine, Ray's default elsewhere.

    Imported here, not at the top: `ray.train.xgboost` imports XGBoost itself, which only notebook 05 needs (the
    course's `playbook` extra; a hosted runtime may have none).
    """
    from ray.train.xgboost import XGBoostConfig

    if not is_on_this_machine(os.environ.get("RAY_ADDRESS")):
        return XGBoostConfig()

    @dataclass
    class SingleWorkerXGBoostConfig(XGBoostConfig):
        """XGBoost without its collective: ``xgboost.train`` in one worker, no tracker, no listening socket."""

        @property
        def backend_cls(self):
            return NoCollectiveBackend

        @property
        def train_func_context(self):
            return contextlib.nullcontext

    return SingleWorkerXGBoostConfig()


def tensorflow_config():
    """The `tensorflow_config` for a `TensorflowTrainer`: no ``TF_CONFIG`` on this machine, Ray's default elsewhere.

    Imported here, not at the top: `ray.train.tensorflow` imports TensorFlow itself, which every other notebook can do
    without (and which Python 3.14 does not have).
    """
    from ray.train.tensorflow import TensorflowConfig

    if not is_on_this_machine(os.environ.get("RAY_ADDRESS")):
        return TensorflowConfig()

    @dataclass
    class SingleWorkerTensorflowConfig(TensorflowConfig):
        """TensorFlow without ``TF_CONFIG``: ``MultiWorkerMirroredStrategy`` runs in its one worker, no gRPC server."""

        @property
        def backend_cls(self):
            return NoCollectiveBackend

    return SingleWorkerTensorflowConfig()
