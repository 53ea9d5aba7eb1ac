"""While a Ray Train run trains on this machine, nothing it starts listens beyond 127.0.0.1.

Each worker of a 2-worker `TorchTrainer` lists, after an all-reduce (so the store and Gloo's pairs are up),
the listening sockets of its own process, and the test fails on any that is not on loopback. Ray's own
`TorchConfig()` is run too: its store listens on every interface (torch has no setting for the address), so
the check is seen to fail there; when a Ray or torch release changes that, this test says so.
"""

from __future__ import annotations

import os
import socket

import psutil
import pytest
import torch
import torch.distributed as dist
from ray.train import ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer

from course.cluster import init_ray
from course.distributed import LoopbackTorchConfig, loopback_interface, torch_config
from helpers.loops import report_epoch
from helpers.train import run_config

LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def fit(config: TorchConfig, name: str):
    # defined here, not at module level: Ray pickles it by value (the workers cannot import a test module)
    def listeners_while_training(config: dict) -> None:
        total = torch.ones(1)
        dist.all_reduce(total)  # every rank connected: the store and the collective sockets are open now
        sockets = [
            (c.laddr.ip, c.laddr.port)
            for c in psutil.Process().net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        wide = [f"{ip}:{port}" for ip, port in sockets if ip not in LOOPBACK]
        metrics = {"world": float(total.item()), "listening": len(sockets), "wide": ";".join(wide) or "-"}
        report_epoch(metrics, save=lambda folder: (folder / "listeners.txt").write_text(str(metrics)))

    init_ray()
    return TorchTrainer(
        listeners_while_training,
        scaling_config=ScalingConfig(num_workers=2),
        torch_config=config,
        run_config=run_config(name),
    ).fit()


@pytest.mark.cluster
def test_the_course_torch_config_keeps_training_on_loopback():
    result = fit(torch_config(), "test-loopback")
    assert result.metrics["world"] == 2.0, "both workers joined the process group"
    assert result.metrics["listening"] >= 1, "rank 0 serves the store: a listener the check must have seen"
    assert result.metrics["wide"] == "-", f"listening beyond 127.0.0.1 while training: {result.metrics['wide']}"


@pytest.mark.cluster
def test_rays_default_rendezvous_listens_on_every_interface():
    """The reason for LoopbackTorchConfig. If this fails, torch or Ray now bind the store to its host."""
    result = fit(TorchConfig(), "test-default-rendezvous")
    assert result.metrics["wide"] != "-", (
        "Ray Train's default rendezvous no longer listens beyond 127.0.0.1: course.distributed may be unneeded"
    )


def test_the_loopback_config_is_for_this_machine(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6389")
    assert isinstance(torch_config(), LoopbackTorchConfig)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert type(torch_config()) is TorchConfig, "on a real cluster the workers talk over the network"
    assert loopback_interface() in {name for _, name in socket.if_nameindex()}


def test_xgboost_and_tensorflow_train_alone_on_this_machine(monkeypatch: pytest.MonkeyPatch):
    from ray.train.xgboost import XGBoostConfig

    from course.distributed import NoCollectiveBackend, collective_workers, tensorflow_config, xgboost_config

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6389")
    assert collective_workers(4) == 1, "one worker: XGBoost's and TensorFlow's peer sockets would listen everywhere"
    assert xgboost_config().backend_cls is NoCollectiveBackend
    with xgboost_config().train_func_context():  # no tracker to connect to: a context that does nothing
        pass
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert collective_workers(4) == 4
    assert type(xgboost_config()) is XGBoostConfig, "on a real cluster, Ray's own collective setup"
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return  # Python 3.14: no TensorFlow, and notebook 05 skips its step
    from ray.train.tensorflow import TensorflowConfig

    assert type(tensorflow_config()) is TensorflowConfig
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6389")
    assert tensorflow_config().backend_cls is NoCollectiveBackend


def test_xgboost_workers_listen_on_every_interface():
    """The reason for collective_workers and xgboost_config: an XGBoost worker joining its tracker binds INADDR_ANY,
    the tracker on 127.0.0.1 notwithstanding. If this fails, XGBoost has learned to bind its host: use it."""
    import threading

    import psutil
    from xgboost import RabitTracker
    from xgboost.collective import CommunicatorContext

    tracker = RabitTracker(n_workers=1, host_ip="127.0.0.1", sortby="task")
    tracker.start()
    threading.Thread(target=tracker.wait_for, daemon=True).start()
    with CommunicatorContext(**tracker.worker_args(), dmlc_task_id="0"):
        listening = [c.laddr.ip for c in psutil.Process().net_connections("inet") if c.status == psutil.CONN_LISTEN]
    assert "127.0.0.1" in listening, "the tracker, on the host it was given"
    assert set(listening) - set(LOOPBACK), f"XGBoost's worker no longer listens beyond loopback: {listening}"


def test_the_loopback_rendezvous_takes_gloo_on_cpus_nccl_on_gpus_and_leaves_other_backends_to_ray():
    """On a GPU machine the rendezvous and NCCL stay on loopback too (join_on_loopback sets NCCL_SOCKET_IFNAME)."""
    from course.distributed import backend_for

    assert backend_for(0, None) == "gloo" and backend_for(1, None) == "nccl" and backend_for(0.5, None) == "nccl"
    assert backend_for(1, "gloo") == "gloo", "a backend asked for by name is kept"
    assert backend_for(0, "mpi") is None, "any other backend: Ray's own rendezvous"


def test_an_nccl_rendezvous_keeps_nccls_sockets_on_loopback(monkeypatch: pytest.MonkeyPatch):
    """What a GPU worker's join sets up, without a GPU: NCCL's bootstrap and socket transport on the loopback interface,
    the store served on 127.0.0.1 by rank 0, NCCL's async error handling on (a stuck collective fails), and the process
    group made with the nccl backend on that store. (NCCL itself has never run here: no GPU.)"""
    from course import distributed

    made: dict = {}

    class Store:
        def __init__(self, host, port, world_size, is_master, timeout, master_listen_fd):
            made["store"] = (host, port, world_size, is_master, master_listen_fd is not None)
            if master_listen_fd is not None:
                socket.socket(fileno=master_listen_fd).close()

    def init_process_group(backend, store, rank, world_size, timeout):
        made["group"] = (backend, isinstance(store, Store), rank, world_size)

    joined = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "MASTER_ADDR")
    joined += ("MASTER_PORT",)
    for name in joined:  # recorded, so that what the join sets is undone after the test
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(dist, "TCPStore", Store)
    monkeypatch.setattr(dist, "init_process_group", init_process_group)
    port = distributed.free_loopback_port()
    distributed.join_on_loopback("nccl", 0, 2, port, 30)
    interface = distributed.loopback_interface()
    assert os.environ["NCCL_SOCKET_IFNAME"] == interface == os.environ["GLOO_SOCKET_IFNAME"]
    assert interface.startswith("lo") and os.environ["MASTER_ADDR"] == "127.0.0.1"
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert made["store"] == ("127.0.0.1", port, 2, True, True)  # rank 0 serves it, on the socket it bound itself
    assert made["group"] == ("nccl", True, 0, 2)
