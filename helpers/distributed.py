"""How Ray Train's workers connect torch.distributed: on 127.0.0.1 only when the cluster is this machine.

Ray Train's default rendezvous (`TorchConfig()`) has rank 0 start torch's TCPStore, and that store listens
on every network interface (torch offers no setting for its address). On a laptop in a room of thirty on
one Wi-Fi, that is a port anyone can reach. :func:`torch_config` gives a `TorchConfig` whose rendezvous
binds the store to 127.0.0.1 itself (a socket handed to the store) and keeps Gloo's collective sockets on
the loopback interface. On a real cluster the workers must reach each other over the network, so there
it is Ray's own `TorchConfig()`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta

import ray
import torch.distributed as dist
from ray.train.torch import TorchConfig
from ray.train.torch.config import _set_torch_distributed_env_vars, _TorchBackend

from helpers.cluster import is_on_this_machine

LOOPBACK_HOST = "127.0.0.1"


def loopback_interface() -> str:
    """The loopback interface's name: `lo` on Linux, `lo0` on macOS."""
    names = [name for _, name in socket.if_nameindex() if name.startswith("lo")]
    return min(names, key=len) if names else "lo"


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK_HOST, 0))
        return probe.getsockname()[1]


def join_on_loopback(backend: str, world_rank: int, world_size: int, port: int, timeout_s: int) -> None:
    """Run on each worker: rank 0 serves the store on 127.0.0.1:``port``, every rank joins the process group."""
    os.environ.update(MASTER_ADDR=LOOPBACK_HOST, MASTER_PORT=str(port), GLOO_SOCKET_IFNAME=loopback_interface())
    timeout = timedelta(seconds=timeout_s)
    listen_fd = None
    if world_rank == 0:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK_HOST, port))
        listener.listen(128)
        listen_fd = listener.detach()  # the store owns the socket from here on
    store = dist.TCPStore(
        LOOPBACK_HOST, port, world_size, is_master=world_rank == 0, timeout=timeout, master_listen_fd=listen_fd
    )
    dist.init_process_group(backend=backend, store=store, rank=world_rank, world_size=world_size, timeout=timeout)


class LoopbackTorchBackend(_TorchBackend):
    """Ray Train's torch backend, with the rendezvous of :func:`join_on_loopback` for CPU workers (Gloo).

    GPU workers (NCCL) keep Ray's own rendezvous: NCCL chooses its own interfaces.
    """

    def on_start(self, worker_group, backend_config: TorchConfig) -> None:
        if worker_group.get_resources_per_worker().get("GPU", 0) or backend_config.backend not in (None, "gloo"):
            return super().on_start(worker_group, backend_config)
        port = free_loopback_port()
        worker_group.execute(_set_torch_distributed_env_vars)  # LOCAL_RANK and friends, as Ray's backend sets
        ray.get(
            [
                worker_group.execute_single_async(
                    rank,
                    join_on_loopback,
                    backend="gloo",
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
