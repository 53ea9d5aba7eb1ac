"""The instructor's pre-flight: check the cluster in RAY_ADDRESS (or a local Ray) before a workshop.

    make doctor                                  # a local Ray on this machine
    RAY_ADDRESS=10.0.0.5:6379 make doctor        # the workshop's cluster

One table of checks, each ✓ or ✗ with its fix in one line; the exit code is 1 when any check is a
blocker (a notebook would fail or wait forever), 2 when there is no cluster to check. Every check has a
time limit: a busy or broken cluster gives a ✗, never a hang. It checks:

* the versions of Python, torch, Ray and transformers on the driver and on every node, against the lock;
* nodes, CPUs, GPUs, memory and object store; on every node Ray says has GPUs, whether torch sees them;
* the storage path (``COURSE_STORAGE_PATH``): written from each node and read back from every other;
* the sources (``COURSE_SOURCES``): stand-ins built and seen from every node, or buckets and the Hub reachable;
* the plan each notebook will use on this cluster, and an estimate of its run time.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import logging
import os
import platform
import re
import socket
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout (`python scripts/doctor.py`): the course's packages are there

# The driver's imports. The functions that run on the nodes import what they need themselves, where they run.
import ray  # noqa: E402

from course import config, lessons  # noqa: E402
from course.cluster import init_ray, on_node, unread_markers  # noqa: E402
from course.deadline import Late, first_line, within  # noqa: E402
from course.resources import cluster_gpus, gpu_of, plan_resources  # noqa: E402
from helpers.vit import architecture_named  # noqa: E402

LOCK = ROOT / "requirements" / "lock.txt"
PACKAGES = ("torch", "ray", "transformers")  # the ones whose versions must match the lock on every node
TASK_TIMEOUT_S = 60  # for the tasks on the nodes: a cold worker imports torch in about 10 s
CONNECT_TIMEOUT_S = 5
# A lesson's `reference_seconds` (course.lessons) is what it took with the cpu budget on the reference machine
# (2 cores, the local 2-node cluster; a fresh clone's `make run`), and this is what the probe below took there: an
# estimate scales the first by the probe's ratio.
REFERENCE_PROBE_S = 1.1  # seconds, the probe there (2026-11-24)
OK, NOT_OK = "✓", "✗"


@dataclass
class Check:
    """One row of the table: what was checked, what was found and, when it failed, the fix."""

    name: str
    ok: bool
    found: str
    fix: str = ""

    def lines(self) -> list[str]:
        rows = [f"{OK if self.ok else NOT_OK} {self.name:<10} {self.found}"]
        return rows + ([f"  {'':<10} fix: {self.fix}"] if not self.ok and self.fix else [])


# --- the cluster ----------------------------------------------------------------------------------


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


def node_label(node: dict, index: int) -> str:
    return f"node {index + 1} ({node['NodeManagerAddress']}{', head' if node.get('IsHeadNode') else ''})"


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


# --- what each node reports (these run on the nodes) ---------------------------------------------------


def versions_here() -> dict[str, str]:
    """Python's and the pinned packages' versions in this process (no import of torch: metadata only)."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "missing"
    try:  # the course's own package: on a worker node it comes with the job's runtime env (py_modules)
        import helpers

        found["helpers"] = "runtime env" if "runtime_resources" in Path(helpers.__file__).parts else "installed"
    except ImportError:
        found["helpers"] = "missing"
    return found


def torch_gpus() -> dict[str, object]:
    """What torch sees in a task that Ray gave a GPU: CUDA available, how many devices, their names."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {
        "cuda": bool(count),
        "count": count,
        "names": [torch.cuda.get_device_name(i) for i in range(count)],
        "memory_gib": min((torch.cuda.get_device_properties(i).total_memory / 2**30 for i in range(count)), default=0),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "torch": torch.__version__,
    }


def node_report(storage: str, folder: str, name: str, local_paths: list[str]) -> dict[str, object]:
    """What a node says alone: its versions, whether it could write to the storage, which local sources it lacks."""
    from course.cluster import missing_paths, write_marker

    return {
        "versions": versions_here(),
        "write": write_marker(storage, folder, name),
        "missing": missing_paths(local_paths),
    }


def probe_seconds(steps: int = 5, batch_size: int = 64) -> float:
    """Seconds for a few training steps of the small CIFAR-10 ViT on one CPU: the unit of the estimates."""
    import torch

    from helpers.vit import SMALL, VisionTransformer

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = VisionTransformer(SMALL)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images, labels = torch.randn(batch_size, 3, 32, 32), torch.randint(0, 10, (batch_size,))
    loss_of = torch.nn.CrossEntropyLoss()
    start = None
    for step in range(steps + 1):  # the first step warms up and is not counted
        if step == 1:
            start = time.perf_counter()
        optimizer.zero_grad()
        loss_of(model(images), labels).backward()
        optimizer.step()
    return time.perf_counter() - start


# --- the checks ---------------------------------------------------------------------------------------


def locked_versions(lock_text: str) -> dict[str, str]:
    """``name -> version`` of the pinned packages in the lock file's text."""
    pins = dict(re.findall(r"^([a-z0-9_.-]+)==([^\s;]+)", lock_text, re.MULTILINE))
    return {name: pins[name] for name in PACKAGES if name in pins}


def version_differences(found: dict[str, str], locked: dict[str, str], python: str) -> list[str]:
    """What in ``found`` differs from the lock (a local tag like ``+cpu`` does not count) or the driver's Python."""
    wrong = [
        f"{name} {found.get(name)} (lock: {want})"
        for name, want in locked.items()
        if found.get(name, "").split("+")[0] != want
    ]
    if found.get("python") != python:
        wrong.append(f"Python {found.get('python')} (driver: {python})")
    if found.get("helpers") == "missing":
        wrong.append("the course's package `helpers` is not installed")
    return wrong


def check_versions(nodes: list[dict], reports: list) -> Check:
    locked = locked_versions(LOCK.read_text())
    driver = versions_here()
    problems = [f"driver: {w}" for w in version_differences(driver, locked, driver["python"])]
    for index, (node, report) in enumerate(zip(nodes, reports, strict=True)):
        if isinstance(report, Exception):
            problems.append(f"{node_label(node, index)}: no answer ({report})")
            continue
        problems += [f"{node_label(node, index)}: {w}" for w in version_differences(report, locked, driver["python"])]
    summary = f"Python {driver['python']}, " + ", ".join(f"{n} {driver[n]}" for n in PACKAGES)
    if problems:
        return Check(
            "versions",
            False,
            "; ".join(problems),
            "give every node the locked packages (the cluster's image: deploy/Dockerfile); the course's own code "
            "travels with the job (course.cluster.job_runtime_env), nothing else is installed by hand",
        )
    shipped = sum(1 for report in reports if isinstance(report, dict) and report.get("helpers") == "runtime env")
    return Check(
        "versions",
        True,
        f"{summary} on the driver and on {len(nodes)} node(s), as locked; helpers through the job's runtime env on "
        f"{shipped} of them",
    )


def planned(resources: dict[str, float]):
    """The budget the notebooks take on a cluster with ``resources``, and their plan (what they ask Ray for)."""
    budget = config.get_budget(cluster_gpus(resources))
    return budget, plan_resources(resources, budget)


def check_resources(nodes: list[dict], resources: dict[str, float]) -> Check:
    gib = 1024**3
    per_node = []
    for node in nodes:
        has = node["Resources"]
        per_node.append(
            f"{has.get('CPU', 0):.0f} CPU/{has.get('GPU', 0):.0f} GPU/{has.get('memory', 0) / gib:.0f} GiB/"
            f"store {has.get('object_store_memory', 0) / gib:.1f} GiB"
        )
    found = f"{len(nodes)} node(s): " + "; ".join(per_node)
    _, plan = planned(resources)
    cpus = int(resources.get("CPU", 0))
    needed = plan.num_workers + 1  # every Ray Train worker holds a CPU; Ray Data needs one more to read
    if cpus < needed:
        return Check(
            "resources",
            False,
            f"{found}: {cpus} CPU(s), fewer than the {needed} a notebook needs (Ray Data would wait forever)",
            "give Ray more logical CPUs (`ray start --num-cpus=4`) or add a node",
        )
    return Check("resources", True, found)


def check_gpus(nodes: list[dict], reports: dict[str, object]) -> Check:
    with_gpus = [(i, n) for i, n in enumerate(nodes) if n["Resources"].get("GPU", 0)]
    if not with_gpus:
        return Check("gpus", True, "none in the cluster: the notebooks use the CPU budget and never ask for a GPU")
    problems, seen = [], []
    for index, node in with_gpus:
        report = reports[node["NodeID"]]
        label, ray_gpus = node_label(node, index), node["Resources"]["GPU"]
        if isinstance(report, Exception):
            problems.append(f"{label}: Ray lists {ray_gpus:.0f} GPU(s), but a task asking for one got {report}")
        elif not report["cuda"]:
            problems.append(
                f"{label}: Ray lists {ray_gpus:.0f} GPU(s), but torch {report['torch']} sees no CUDA device"
            )
        else:
            seen.append(f"{label}: {report['count']}x {report['names'][0]}")
    if problems:
        return Check(
            "gpus",
            False,
            "; ".join(problems),
            "start that node with the GPUs it really has (`ray start --num-gpus=0` on a CPU machine), "
            "or install torch's CUDA build there (`make setup` on a machine with nvidia-smi)",
        )
    return Check("gpus", True, "torch sees them: " + "; ".join(seen))


def check_storage(storage: str, nodes: list[dict], writes: list, reads: list) -> Check:
    fix = (
        "set COURSE_STORAGE_PATH to a folder every node shares (an NFS mount such as /mnt/cluster_storage) "
        "or to a bucket (s3://bucket/prefix)"
    )
    problems = []
    for index, (node, error) in enumerate(zip(nodes, writes, strict=True)):
        if error:
            problems.append(f"{node_label(node, index)} cannot write there ({error})")
    labels = {n["NodeID"]: node_label(n, i) for i, n in enumerate(nodes)}
    written = {n["NodeID"] for n, error in zip(nodes, writes, strict=True) if not error}
    for index, (node, missing) in enumerate(zip(nodes, reads, strict=True)):
        if isinstance(missing, Exception):
            problems.append(f"{node_label(node, index)} cannot read there ({missing})")
            continue
        unseen = [labels[m] for m in missing if m in written and m != node["NodeID"]]
        if unseen:
            problems.append(f"{node_label(node, index)} does not see what {', '.join(unseen)} wrote")
    if problems:
        return Check("storage", False, f"{storage}: " + "; ".join(problems), fix)
    return Check("storage", True, f"{storage}: written by each of {len(nodes)} node(s), read back by every node")


def local_sources(sources) -> list[str]:
    """The local paths among the sources that exist here: every node must see them too (Ray reads them there)."""
    return [u for k, u in vars(sources).items() if k != "kind" and config.is_local(u) and Path(u).exists()]


def check_sources(nodes: list[dict], missing_by_node: list, resources: dict[str, float]) -> list[Check]:
    budget, _ = planned(resources)
    sources = sources_for(budget)
    checks = []
    try:
        config.require_data(sources)
        found = f"{sources.kind}: everything is there"
        local = local_sources(sources)
        problems = []
        for index, (node, missing) in enumerate(zip(nodes, missing_by_node, strict=True)):
            if isinstance(missing, Exception):  # the node could not run the course's task: see the versions row
                problems.append(f"{node_label(node, index)}: no answer ({missing})")
            elif missing:
                problems.append(f"{node_label(node, index)} lacks {', '.join(missing)}")
        if problems:
            checks.append(
                Check(
                    "sources",
                    False,
                    "; ".join(problems),
                    "put the data on storage every node mounts: `make data COURSE_DATA_DIR=/mnt/cluster_storage/"
                    "vit-ray-course/data`, then set COURSE_DATA_DIR there for the notebooks too",
                )
            )
        else:
            checks.append(
                Check("sources", True, found + (f", seen from every node ({len(local)} local)" if local else ""))
            )
    except FileNotFoundError as error:
        fix = (
            f"run `{config.BUILD_COMMAND}`" if sources.kind == "standin" else f"check the URI, or {config.SOURCES_ENV}"
        )
        checks.append(Check("sources", False, str(error).split(". ")[0], fix))
    if sources.kind == "real":
        checks.append(check_hub(sources))
    return checks


def in_hub_cache(kind: str, repo_id: str) -> bool:
    """Whether this machine's Hugging Face caches hold ``repo_id`` as an offline run reads it: a model's
    ``config.json`` in the Hub's cache; a data set prepared by datasets (its Arrow files: datasets reads only those
    offline, not the Hub cache's parquet files)."""
    if kind == "model":
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    from datasets import config as datasets_config

    prepared = Path(datasets_config.HF_DATASETS_CACHE) / repo_id.replace("/", "___")
    return any(prepared.rglob("*.arrow")) if prepared.is_dir() else False


HUB_TRUE = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub reads as true in HF_HUB_OFFLINE (any case)


def check_hub(sources) -> Check:
    """The Hub's data set and model that the real sources name: each answers (online), or each is in the caches
    (``HF_HUB_OFFLINE=1``)."""
    wanted = [
        (kind, repo)
        for kind, repo in (("dataset", sources.beans), ("model", sources.model))
        if not config.is_local(repo)
    ]
    if not wanted:
        return Check("hub", True, "nothing to read from the Hub (local folders)")
    offline = os.environ.get("HF_HUB_OFFLINE", "")
    if offline.strip().upper() in HUB_TRUE:
        missing = [f"{kind} {repo}" for kind, repo in wanted if not in_hub_cache(kind, repo)]
        if missing:
            return Check(
                "hub",
                False,
                f"HF_HUB_OFFLINE={offline}, and the caches lack {', '.join(missing)}",
                "unset HF_HUB_OFFLINE and run the notebooks once online (it fills the caches), or fill them on a "
                "machine online and copy HF_HOME here",
            )
        cached = ", ".join(f"{kind} {repo}" for kind, repo in wanted)
        return Check("hub", True, f"HF_HUB_OFFLINE={offline}: {cached} in the caches")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    answered, problems = [], []
    for kind, repo in wanted:
        url = f"{endpoint}/api/{kind}s/{repo}"
        try:
            with urllib.request.urlopen(url, timeout=CONNECT_TIMEOUT_S):
                answered.append(f"{kind} {repo}")
        except OSError as error:
            problems.append(f"{url}: {error}")
    if problems:
        return Check(
            "hub",
            False,
            "; ".join(problems),
            "open the network to huggingface.co (or set HF_ENDPOINT to a mirror); a 404 names an id that moved: "
            f"set it in course/config.py or {config.MODEL_ENV}",
        )
    return Check("hub", True, f"{endpoint} has " + ", ".join(answered))


# --- the GPU estimates -------------------------------------------------------------------------------------------


def budget_precision(gpu) -> str:
    return f"the fine-tunes in {gpu.mixed_precision}, notebooks 04 and 07 in fp32"


def model_shapes(sources, budget) -> dict:
    """The shapes (``lessons.Shape``) of the models the lessons put on a GPU: the sources' pretrained model (its
    ``config.json``, from its folder or the Hub's cache; ViT-B/16, the largest, where it cannot be read), notebook 04's
    ViT, 05's linear model."""
    shape = lessons.Shape
    known = {  # the real sources' models, with the beans/dogs head
        "google/vit-base-patch16-224-in21k": shape.vit(224, 16, 12, 768, 12, 3072, 3),
        "facebook/deit-tiny-patch16-224": shape.vit(224, 16, 12, 192, 3, 768, 3),
    }
    pretrained = known.get(sources.model)
    if pretrained is None:
        try:
            if config.is_local(sources.model):
                import json

                found = json.loads((Path(sources.model) / "config.json").read_text())
            else:  # the Hub's cache only: the doctor waits on no download
                from transformers import AutoConfig

                found = AutoConfig.from_pretrained(sources.model, local_files_only=True).to_dict()
            pretrained = shape.vit(
                found["image_size"],
                found["patch_size"],
                found["num_hidden_layers"],
                found["hidden_size"],
                found["num_attention_heads"],
                found["intermediate_size"],
                len(found.get("id2label") or {0: 0, 1: 1}),
            )
        except Exception:  # not a ViT-like config, or not readable from here: ViT-B/16's size
            pretrained = known["google/vit-base-patch16-224-in21k"]
    arch = architecture_named(budget.cifar.architecture)
    cifar = shape.vit(
        arch.image_size, arch.patch_size, arch.num_layers, arch.hidden_dim, arch.num_heads, arch.mlp_dim, 10
    )
    return {"pretrained": pretrained, "cifar": cifar, "linear": shape(3 * 32 * 32 * 10 + 10)}


MEASURED_WITH = "facebook/deit-tiny-patch16-224"  # the model the lessons' real_reference_seconds were measured with


def model_factor(lesson, budget) -> float:
    """How many times the compute of :data:`MEASURED_WITH` the pretrained model in use takes per image (its forward
    pass, from its size: ``lessons.Shape``), for a lesson that fine-tunes it; 1 for the others. ``COURSE_MODEL`` set
    to ViT-B/16 on a laptop makes 01 to 03 and 06 about 16 times as long as the measured times."""
    if "model" not in lesson.sources:
        return 1.0
    shapes = model_shapes(sources_for(budget), budget)
    measured = model_shapes(replace(sources_for(budget), model=MEASURED_WITH), budget)
    return shapes["pretrained"].forward_flops() / measured["pretrained"].forward_flops()


def sources_for(budget):
    """The sources the notebooks read with ``budget`` (the real model may follow the budget)."""
    return config.get_sources(budget=budget)


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def gpu_row(lesson, budget, plan, gpu, text: str) -> Check:
    """A lesson's plan row with its GPU estimate on ``gpu``; a blocker, with the setting that fixes it, where the
    largest thing it holds does not fit one GPU."""
    estimates = lessons.gpu_estimates(lesson, budget, plan, gpu, model_shapes(sources_for(budget), budget))
    if not estimates:
        return Check(lesson.number, True, f"{text}; no GPU")
    peak = max(estimates, key=lambda e: e.total_gib)
    _, seconds = lessons.gpu_summary(estimates)
    parts = (
        f"weights {peak.parameters_gib:.1f} + optimizer {peak.optimizer_gib:.1f} + activations "
        f"{peak.activations_gib:.1f} at batch {peak.work.batch} ({peak.work.what})"
    )
    found = f"{text}; GPU {peak.total_gib:.1f} of {gpu.memory_gib:.0f} GiB ({parts}); about {duration(seconds)}"
    too_big = [e for e in estimates if not e.fits]
    if too_big:
        return Check(lesson.number, False, f"{found}: does not fit a {gpu.name}", lessons.refit(too_big[0]))
    return Check(lesson.number, True, found)


def plan_rows(
    resources: dict[str, float], probe: float | Exception, gpu_memory_gib: float | None = None
) -> list[Check]:
    """One row per notebook: what it will ask Ray for, its main sizes, and an estimate of its run time; with GPUs,
    its GPU memory and time (:func:`gpu_row`), a blocker where it does not fit."""
    budget, plan = planned(resources)
    gpu = gpu_of(resources, gpu_memory_gib) if plan.use_gpu else None
    rows = []
    for lesson in lessons.LESSONS:
        text = lesson.plan(budget, plan)
        if budget.kind == "cpu" and isinstance(probe, float):  # the real sources' times: at the real model's sizes
            factor = model_factor(lesson, budget) if config.sources_kind() == "real" else 1.0
            minutes = lesson.reference_seconds_for(config.sources_kind()) * factor * probe / REFERENCE_PROBE_S / 60
            text += f"; about {max(1, round(minutes))} min"
            text += f" ({factor:.0f} x the compute of {MEASURED_WITH}, measured)" if factor >= 1.5 else ""
        rows.append(gpu_row(lesson, budget, plan, gpu, text) if gpu else Check(lesson.number, True, text))
    if gpu:
        rows.append(
            Check(
                "estimate",
                True,
                f"GPU memory and time per lesson on one {gpu.name} ({gpu.memory_gib:.0f} GiB, "
                f"{budget_precision(gpu)}): from the models' sizes and the budget, at "
                f"{lessons.EFFICIENCY:.0%} of its peak; not measured (time one `make run` here)",
            )
        )
    elif budget.kind != "cpu":
        rows.append(Check("estimate", True, "none for the gpu budget yet: time one `make run` on this cluster"))
    elif isinstance(probe, Exception):
        rows.append(Check("estimate", False, f"the probe task failed: {probe}", "see the versions and resources rows"))
    else:
        rows.append(
            Check(
                "estimate",
                True,
                f"a training probe took {probe:.2f} s on a worker node, {REFERENCE_PROBE_S:.2f} s on the reference "
                f"machine (2 cores): its measured times scaled by {probe / REFERENCE_PROBE_S:.1f}",
            )
        )
    return rows


def run_checks() -> list[Check]:
    resources = connect(TASK_TIMEOUT_S)
    nodes = alive_nodes()
    storage = config.storage_path()
    folder = f".doctor-{uuid.uuid4().hex[:8]}"
    local = local_sources(config.get_sources())

    # One task per node answers what it can alone; then every node reads what the others wrote. The GPU
    # checks and the probe go alongside. Few tasks, so few new worker processes: each costs seconds.
    gpu_nodes = [n for n in nodes if n["Resources"].get("GPU", 0)]
    reports = gather([on_node(node_report, n).remote(storage, folder, n["NodeID"], local) for n in nodes])
    names = names_of(nodes)
    # where the notebooks' workers run: the node with the most CPUs (a head may keep none)
    worker_node = max(reversed(nodes), key=lambda node: node["Resources"].get("CPU", 0))
    answers = iter(  # waited for together, one time limit for all
        gather(
            [on_node(unread_markers, n).remote(storage, folder, names) for n in nodes]
            + [on_node(torch_gpus, n, num_gpus=1).remote() for n in gpu_nodes]
            + [on_node(probe_seconds, worker_node, num_cpus=1).remote()]
        )
    )
    reads = [next(answers) for _ in nodes]
    gpus = {name: next(answers) for name in names_of(gpu_nodes)}
    probe = next(answers)
    # The driver tidies up. A storage it cannot reach (pyarrow's OSError), or a path it cannot read (ValueError),
    # holds nothing of the doctor's: the storage row says why.
    with contextlib.suppress(OSError, ValueError):
        fs, path = config.filesystem(storage)
        fs.delete_dir(f"{path}/{folder}")
    failed = [r if isinstance(r, Exception) else None for r in reports]
    versions = [f or r["versions"] for f, r in zip(failed, reports, strict=True)]
    writes = [str(f) if f else r["write"] for f, r in zip(failed, reports, strict=True)]
    missing = [f or r["missing"] for f, r in zip(failed, reports, strict=True)]

    checks = [check_versions(nodes, versions), check_resources(nodes, resources), check_gpus(nodes, gpus)]
    checks.append(check_storage(storage, nodes, writes, reads))
    checks += check_sources(nodes, missing, resources)
    measured = [g["memory_gib"] for g in gpus.values() if isinstance(g, dict) and g.get("memory_gib")]
    return checks + plan_rows(resources, probe, min(measured) if measured else None)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    address = os.environ.get("RAY_ADDRESS")
    start = time.perf_counter()
    print(f"make doctor: checking {'the cluster at ' + address if address else 'a local Ray on this machine'}")
    problem = address_problem(address)
    if problem:
        fix = (
            "start the cluster (`scripts/with-ray-cluster.sh start`), correct RAY_ADDRESS, or unset it for a local Ray"
        )
        print("\n".join(Check("cluster", False, problem, fix).lines()))
        return 2
    try:
        checks = run_checks()
    except Exception as error:
        print(f"{NOT_OK} {'cluster':<10} cannot connect: {first_line(error, 200)}")
        print(f"  {'':<10} fix: check RAY_ADDRESS and the token (RAY_AUTH_TOKEN_PATH), or unset it for a local Ray")
        return 2
    for check in checks:
        print("\n".join(check.lines()))
    blockers = [c for c in checks if not c.ok]
    verdict = f"{len(blockers)} blocker(s): fix them before the workshop" if blockers else "ready"
    print(f"{verdict} ({time.perf_counter() - start:.0f} s)")
    return 1 if blockers else 0


if __name__ == "__main__":
    sys.exit(main())
