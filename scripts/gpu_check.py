"""`make gpu-check`: what only a GPU shows, in minutes, as one table. Run it on a machine with an NVIDIA GPU.

    make gpu-check                  # the local cluster (started and stopped around it), or the one in RAY_ADDRESS

One row per check, then the table (also in results/gpu-check/gpu-check.md):

* the precision the course trains in on each card (``course.resources.precision``: bf16 where it is native, fp16
  on a T4 or a V100), beside what the card is;
* a checkpoint saved from the GPU, loaded by a process that sees no GPU (``CUDA_VISIBLE_DEVICES=``), as notebook 07
  loads its best trial's and a CPU-only laptop would;
* NCCL between two Ray Train workers, one GPU each: an all-reduce of a tensor on each worker's GPU (where the
  cluster has two GPUs; else the row says it did not run, and why);
* notebook 04b's FSDP2 policies on one GPU: the peak of ``torch.cuda.max_memory_allocated()`` over a few training
  steps of the gpu budget's ViT (``budget.fsdp``, ViT-B's shape) in fp32, with ``MixedPrecisionPolicy`` (bf16) and
  with ``CPUOffloadPolicy``, in a process group of one (NCCL over an in-memory store);
* every notebook on the ``gpu`` budget at the smoke size (``COURSE_BUDGET=gpu COURSE_SMOKE=1``, nbmake), each one's
  time and outcome;
* ``make bench QUICK=1``.

Without a GPU it stops at once and says so: everything else is what `make test` and `make smoke` check.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path

import torch

from course import config
from course.storage import run_name, storage_path

OUT = config.RESULTS_DIR / "gpu-check"
LIMIT_S = 8 * 60  # the whole check, on one GPU (issue 57)
Row = tuple[str, str, str]  # check, outcome, seconds


def precisions() -> list[Row]:
    """One row per visible card: its name, compute capability and the precision the course picks there."""
    from course import resources

    rows = []
    for index in range(torch.cuda.device_count()):
        with torch.cuda.device(index):
            major, minor = torch.cuda.get_device_capability(index)
            name = torch.cuda.get_device_name(index)
            memory = torch.cuda.get_device_properties(index).total_memory / 2**30
            rows.append(
                (
                    f"precision on GPU {index}",
                    f"ok: {resources.precision()} on {name} ({major}.{minor}, {memory:.0f} GiB)",
                    "0",
                )
            )
    return rows


LOAD_ON_A_CPU = """
import sys, torch
from helpers.vit import VisionTransformer, architecture_named
assert not torch.cuda.is_available(), "this process should see no GPU"
model = VisionTransformer(architecture_named("small"))
model.load_state_dict(torch.load(sys.argv[1], map_location="cpu"))
print(sum(float(p.detach().sum()) for p in model.parameters()))
"""


def checkpoint_to_a_cpu() -> str:
    """A ViT's weights saved on the GPU, loaded where there is none: the same sum of weights on both sides."""
    from helpers.vit import VisionTransformer, architecture_named

    model = VisionTransformer(architecture_named("small")).cuda()
    expected = sum(float(p.detach().sum()) for p in model.parameters())
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "weights.pt"
        torch.save(model.state_dict(), path)  # tensors on cuda:0, as a GPU worker's checkpoint holds them
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        done = subprocess.run(
            [sys.executable, "-c", LOAD_ON_A_CPU, str(path)], env=env, capture_output=True, text=True, timeout=300
        )
    if done.returncode:
        return "FAILED: " + (done.stderr.strip().splitlines() or ["no output"])[-1]
    loaded = float(done.stdout.split()[-1])
    same = abs(loaded - expected) <= 1e-3 * max(1.0, abs(expected))
    return "ok: the same weights" if same else f"FAILED: sum of weights {loaded} on the CPU, {expected} on the GPU"


def nccl_between_two_workers() -> str:
    """An all-reduce over NCCL between two Ray Train workers, one GPU each."""
    import ray
    from ray.train import ScalingConfig
    from ray.train.torch import TorchTrainer

    from course.cluster import init_ray
    from course.distributed import torch_config
    from course.resources import cluster_gpus

    gpus = cluster_gpus(init_ray())
    if gpus < 2:
        return f"not run: the cluster has {gpus} GPU (two workers need two)"

    def all_reduce(_: dict) -> None:
        import ray.train
        import ray.train.torch
        import torch.distributed as dist

        assert dist.get_backend() == "nccl", dist.get_backend()
        rank = ray.train.get_context().get_world_rank()
        value = torch.full((1,), float(rank + 1), device=ray.train.torch.get_device())  # NCCL: a tensor on the GPU
        dist.all_reduce(value)
        ray.train.report({"sum": float(value.item())})

    trainer = TorchTrainer(
        all_reduce,
        scaling_config=ScalingConfig(num_workers=2, use_gpu=True),
        torch_config=torch_config(),
        run_config=ray.train.RunConfig(name=run_name("gpu-check-nccl"), storage_path=storage_path()),
    )
    total = trainer.fit().metrics["sum"]
    return "ok: 1 + 2 = 3 over NCCL" if total == 3 else f"FAILED: the all-reduce gave {total}, not 3"


FSDP_STEPS = 3  # training steps of each policy in fsdp_policies_on_one_gpu


def fsdp_policies_on_one_gpu() -> str:
    """Notebook 04b's ViT (the gpu budget's) sharded with FSDP2 on this process's GPU, a group of one: the peak memory
    of a few steps in fp32, with bf16 mixed precision, and with the state offloaded to the CPU."""
    import torch.distributed as dist
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    from course.budget import get_budget
    from helpers.vit import Architecture, VisionTransformer

    f = get_budget(kind="gpu", smoke_size=False).fsdp
    shape = Architecture(num_layers=f.num_layers, num_heads=f.num_heads, hidden_dim=f.hidden_dim, mlp_dim=f.mlp_dim)
    policies = {
        "fp32": {},
        "bf16": {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)},
        "offload": {"offload_policy": CPUOffloadPolicy()},
    }
    peaks = {}
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=torch.device("cuda:0"))
    try:
        for name, options in policies.items():
            torch.manual_seed(0)
            model = VisionTransformer(shape).cuda()
            for block in model.encoder.layers:
                fully_shard(block, **options)
            fully_shard(model, **options)
            optimizer = torch.optim.AdamW(model.parameters(), lr=f.learning_rate)
            images = torch.randn(f.batch_size, 3, shape.image_size, shape.image_size, device="cuda")
            labels = torch.randint(0, shape.num_classes, (f.batch_size,), device="cuda")
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            for _ in range(FSDP_STEPS):
                loss = torch.nn.functional.cross_entropy(model(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            torch.cuda.synchronize()
            peaks[name] = torch.cuda.max_memory_allocated() / 2**30
            del model, optimizer, images, labels, loss
            torch.cuda.empty_cache()
    finally:
        dist.destroy_process_group()
    found = ", ".join(f"{name} {gib:.2f}" for name, gib in peaks.items())
    return f"ok: peak GiB over {FSDP_STEPS} steps of batch {f.batch_size}: {found}"


def notebooks_at_the_smoke_size() -> list[Row]:
    """nbmake over every notebook on the gpu budget at the smoke size; a row per notebook from pytest's JUnit XML."""
    report = OUT / "notebooks.xml"
    env = {**os.environ, "COURSE_BUDGET": "gpu", "COURSE_SMOKE": "1", "COURSE_RESULTS_DIR": str(OUT / "results")}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "--nbmake"]
    command += ["--nbmake-timeout=600", f"--junitxml={report}", str(config.REPO_ROOT / "notebooks")]
    subprocess.run(command, env=env, cwd=config.REPO_ROOT, stdout=(OUT / "notebooks.log").open("w"), check=False)
    rows = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        outcome = "ok" if failed is None else "FAILED: " + (failed.get("message") or "")[:100]
        rows.append((f"notebook {case.get('name')} (gpu, smoke)", outcome, f"{float(case.get('time', 0)):.0f}"))
    return rows or [("notebooks (gpu, smoke)", f"FAILED: nothing ran, see {OUT / 'notebooks.log'}", "0")]


def bench_quick() -> str:
    """`make bench QUICK=1` on the same cluster (RAY_ADDRESS is set: it starts none of its own)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "bench", "QUICK=1"],
        cwd=config.REPO_ROOT,
        check=False,
        stdout=(OUT / "bench.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    return "ok: results/bench/bench.md" if done.returncode == 0 else f"FAILED: see {OUT / 'bench.log'}"


def timed(name: str, check: Callable[[], str]) -> Row:
    start = time.perf_counter()
    try:
        outcome = check()
    except Exception as error:  # a check that breaks is a row that says so, and the others still run
        outcome = f"FAILED: {type(error).__name__}: {error}"[:160]
    return name, outcome, f"{time.perf_counter() - start:.0f}"


def table(rows: list[Row]) -> str:
    lines = ["| check | outcome | seconds |", "|---|---|---|"]
    return "\n".join(lines + [f"| {name} | {outcome} | {seconds} |" for name, outcome, seconds in rows])


def main() -> int:
    if not torch.cuda.is_available():
        print(
            "make gpu-check needs an NVIDIA GPU that torch sees; this machine has none (make test and make smoke "
            "check everything else)",
            file=sys.stderr,
        )
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = precisions()
    rows.append(timed("checkpoint saved on the GPU, loaded on a CPU-only process", checkpoint_to_a_cpu))
    rows.append(timed("NCCL between two Ray Train workers", nccl_between_two_workers))
    rows.append(timed("04b's FSDP2 policies on one GPU (max_memory_allocated)", fsdp_policies_on_one_gpu))
    rows += notebooks_at_the_smoke_size()
    rows.append(timed("make bench QUICK=1", bench_quick))
    seconds = time.perf_counter() - start
    rows.append(
        ("all of it", f"{'ok' if seconds <= LIMIT_S else 'OVER'} the {LIMIT_S // 60} min target", f"{seconds:.0f}")
    )
    text = table(rows)
    (OUT / "gpu-check.md").write_text(text + "\n")
    print(text)
    return 1 if any(outcome.startswith("FAILED") for _, outcome, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
