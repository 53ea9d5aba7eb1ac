"""The GPU path, checked without a GPU: what only a GPU would reveal (issue 40), one kind of mistake per test.

Checkpoints load with ``map_location``; a collective's tensors live on the device of the process group's backend;
bf16 only where the GPU computes it natively; the model's actors and replicas ask for a GPU where the plan has GPUs;
notebook 04's baseline trains where a GPU is; and the GPU's data path: image workers, pinned memory, no float32 copy
of a whole split, a full batch per GPU, no optimizer state downloaded for inference.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow.fs as pafs
import pytest
import ray
import torch
from executed import NOTEBOOKS, ROOT
from python_source import parse
from ray.train import Checkpoint

from course import config, resources
from course.budget import get_budget
from course.cluster import init_ray
from course.resources import GPUS, Plan, gpus_per_replica, per_gpu_batches, plan_resources
from course.sources import STANDIN_CIFAR10
from helpers import cifar, inference, train

GPU_BUDGET = get_budget(kind="gpu")
ON_GPUS = {gpus: plan_resources({"CPU": 16.0 * gpus, "GPU": float(gpus)}, GPU_BUDGET) for gpus in (1, 2, 8, 16)}
ON_CPUS = plan_resources({"CPU": 8.0}, GPU_BUDGET)


def code_of(path: Path) -> list[tuple[str, ast.Module]]:
    """(where, parsed code) of a notebook's code cells or a Python file."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        return [
            (f"{path.name} cell {cell['id']}", parse("".join(cell["source"])))
            for cell in cells
            if cell["cell_type"] == "code"
        ]
    return [(str(path.relative_to(ROOT)), parse(path.read_text()))]


def course_code() -> list[tuple[str, ast.Module]]:
    files = [*NOTEBOOKS, *sorted((ROOT / "solutions").glob("*.ipynb"))]
    files += sorted((ROOT / "helpers").rglob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))
    return [found for path in files for found in code_of(path)]


def dotted(node: ast.AST) -> str:
    """``torch.distributed.all_reduce`` for that attribute chain ('' for anything else)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


# --- checkpoints -----------------------------------------------------------------------------------------------------


def test_every_checkpoint_load_says_where_its_tensors_go():
    """On a GPU cluster rank 0 saves tensors on its GPU; a process without one cannot load them unless told where."""
    loads, unplaced = 0, []
    for where, tree in course_code():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and dotted(node.func) == "torch.load":
                loads += 1
                if not any(keyword.arg == "map_location" for keyword in node.keywords):
                    unplaced.append(f"{where} line {node.lineno}")
    assert loads >= 3, "the notebooks 04, 05 and 07 load checkpoints with torch.load"
    assert not unplaced, f"torch.load without map_location (a GPU's tensors fail on a CPU): {unplaced}"


# --- collectives -----------------------------------------------------------------------------------------------------

COLLECTIVES = {"all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter", "all_to_all"}
FACTORIES = {"zeros", "ones", "tensor", "full", "empty", "zeros_like", "ones_like", "as_tensor"}
# Functions whose collectives run in a process group of CPU workers only (Gloo), whatever the cluster has: checked
# below, every ScalingConfig of their file asks for no GPU.
CPU_WORKERS_ONLY = {("course/exercises/cifar10_pytorch_to_ray.py", "_observed")}


def test_the_collectives_on_cpu_tensors_run_on_cpu_workers_only():
    for where, _ in CPU_WORKERS_ONLY:
        tree = parse((ROOT / where).read_text())
        configs = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and dotted(n.func).endswith("ScalingConfig")]
        assert configs and not any(k.arg in ("use_gpu", "resources_per_worker") for c in configs for k in c.keywords)


def test_every_collective_tensor_is_made_on_the_workers_device():
    """NCCL (the process group on GPUs) has no CPU backend: a collective on a CPU tensor raises there, and only there.
    Every tensor a torch collective reads is made with ``device=`` (and so is all that is added to it)."""
    collectives, problems = 0, []
    for where, tree in course_code():
        for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            made = {}  # name -> the factory calls that make it or are added to it
            for node in ast.walk(function):
                if isinstance(node, ast.Assign | ast.AugAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    value = node.value
                    if isinstance(value, ast.Call) and dotted(value.func).split(".")[-1] in FACTORIES:
                        for target in targets:
                            if isinstance(target, ast.Name):
                                made.setdefault(target.id, []).append(value)
            for node in ast.walk(function):
                if not (isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] in COLLECTIVES):
                    continue
                if not dotted(node.func).startswith(("torch.distributed.", "dist.")):
                    continue  # TensorFlow's replica context, XGBoost's collective: their own devices
                collectives += 1
                if (where, function.name) in CPU_WORKERS_ONLY:
                    continue
                tensor = node.args[0] if node.args else None
                if not isinstance(tensor, ast.Name) or tensor.id not in made:
                    problems.append(f"{where}, {function.name}: {ast.unparse(node)} on a tensor not made here")
                    continue
                for factory in made[tensor.id]:
                    if not any(keyword.arg == "device" for keyword in factory.keywords):
                        problems.append(f"{where}, {function.name}: {ast.unparse(factory)} has no device=")
    assert collectives >= 1, "notebook 05 sums its validation counts with torch.distributed.all_reduce"
    assert not problems, "a collective's tensor on the CPU (NCCL raises): " + "; ".join(problems)


# --- precision -------------------------------------------------------------------------------------------------------

CAPABILITIES = {"T4": (7, 5), "V100": (7, 0), "A10G": (8, 6), "L4": (8, 9), "A100": (8, 0), "H100": (9, 0)}


@pytest.fixture
def fake_gpu(monkeypatch):
    """A CUDA device of a given compute capability, as torch 2.13's `is_bf16_supported` asks about it (emulated bf16
    works everywhere: `_check_bf16_tensor_supported` says yes, as it does on a real T4 or V100)."""

    def install(capability: tuple[int, int], count: int = 1) -> None:
        major, minor = capability
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (major, minor))
        properties = SimpleNamespace(major=major, minor=minor)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: properties)
        monkeypatch.setattr(torch.cuda, "_check_bf16_tensor_supported", lambda device: True)

    return install


@pytest.mark.parametrize("name", sorted(CAPABILITIES))
def test_bf16_only_where_the_gpu_computes_it_natively(fake_gpu, name):
    fake_gpu(CAPABILITIES[name])
    native = CAPABILITIES[name] >= (8, 0)
    assert torch.cuda.is_bf16_supported(), "torch counts emulated bf16 too: the trap this test is about"
    assert resources.precision_args() == ({"bf16": True} if native else {"fp16": True}), name
    assert resources.precision() == GPUS[name].mixed_precision == ("bf16" if native else "fp16")


def test_full_precision_on_a_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resources.precision_args() == {"use_cpu": True} and resources.precision() == "fp32"


# --- who may compute on the GPU ---------------------------------------------------------------------------------------


def test_the_local_cluster_reports_the_gpus_of_its_machine(fake_gpu):
    """`make run` on a GPU machine (a learner's Colab, a workstation): the head node reports the machine's GPUs.
    Ray's ``Cluster`` fills a ``num_gpus`` left at None with 0: on one H200 the course's cluster reported none."""
    import local_cluster  # scripts/, on the path through `executed`
    from ray._private.parameter import RayParams

    fake_gpu(CAPABILITIES["T4"], count=2)
    head = local_cluster.head_node_args(local_cluster.node_args(4, "/tmp/ray-course-test"), 6389, head_only=False)
    params = RayParams(**head)
    params.update_if_absent(num_gpus=0)  # what `ray.cluster_utils.Cluster.add_node` does with its defaults
    assert params.num_gpus == 2
    # `make test`'s head node has no CPUs: a GPU there could never be given to a worker, which needs a CPU beside it
    alone = local_cluster.head_node_args(local_cluster.node_args(4, "/tmp/ray-course-test"), 6389, head_only=True)
    assert alone["num_cpus"] == 0 and alone["num_gpus"] == 0


def test_a_driver_that_sees_a_gpu_computes_on_it(fake_gpu):
    fake_gpu(CAPABILITIES["L4"])
    assert resources.has_gpu() and resources.device().type == "cuda" and resources.precision_args() == {"bf16": True}


@pytest.mark.cluster
def test_a_ray_worker_given_no_gpu_computes_on_the_cpu_though_its_machine_has_one():
    """Ray hides no GPU from a task or actor that asked for none. On one H200, Ray Train workers scheduled on CPUs
    saw the GPU, and the Hugging Face ``Trainer`` crashed in 02, 02b and 03 (DDP got the CPU model with a GPU's
    device id)."""
    init_ray()

    @ray.remote(num_cpus=1, max_calls=1)  # max_calls: the worker process, with its patched torch, ends after this
    def what_a_cpu_worker_picks() -> tuple:
        torch.cuda.is_available = lambda: True  # the machine has a GPU; Ray gave this task none
        return resources.has_gpu(), resources.precision_args(), resources.device().type, resources.loader_workers()

    assert ray.get(what_a_cpu_worker_picks.remote(), timeout=180) == (False, {"use_cpu": True}, "cpu", 0)


# --- the model's actors and replicas ---------------------------------------------------------------------------------

MODEL_LOADERS = {"ImageClassifier", "load_model", "from_pretrained"}


def loads_a_model(cls: ast.ClassDef) -> bool:
    calls = [n for n in ast.walk(cls) if isinstance(n, ast.Call)]
    names = {dotted(call.func).split(".")[-1] for call in calls}
    pretrained = [c for c in calls if dotted(c.func).endswith("from_pretrained") and "Model" in dotted(c.func)]
    return bool(names & (MODEL_LOADERS - {"from_pretrained"})) or bool(pretrained)


def num_gpus_asked(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "num_gpus":
            return keyword.value
        if keyword.arg == "ray_actor_options" and isinstance(keyword.value, ast.Dict):
            for key, value in zip(keyword.value.keys, keyword.value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "num_gpus":
                    return value
    return None


def gpu_requests(notebook: str) -> tuple[dict[str, ast.expr | None], list[ast.stmt]]:
    """For each class of ``notebook`` that loads the model: what its deployment or actor pool asks for as
    ``num_gpus`` (None: nothing); and the notebook's top-level assignments of names those requests read."""
    cells = [tree for _, tree in code_of(ROOT / "notebooks" / f"{notebook}.ipynb")]
    classes = [n for tree in cells for n in tree.body if isinstance(n, ast.ClassDef) and loads_a_model(n)]
    asked: dict[str, ast.expr | None] = {}
    for cls in classes:
        for decorator in cls.decorator_list:
            if isinstance(decorator, ast.Call) and dotted(decorator.func) == "serve.deployment":
                asked[cls.name] = num_gpus_asked(decorator)
        for tree in cells:
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and dotted(node.func).endswith("map_batches")
                    and node.args
                    and isinstance(node.args[0], ast.Name)
                    and node.args[0].id == cls.name
                ):
                    asked[cls.name] = num_gpus_asked(node)
        assert cls.name in asked, f"{notebook}: {cls.name} loads the model but is neither a deployment nor a pool"
    assignments = [n for tree in cells for n in tree.body if isinstance(n, ast.Assign)]
    return asked, assignments


@pytest.mark.parametrize("notebook", ["03_ray_data", "06_ray_serve"])
def test_every_actor_and_replica_that_runs_the_model_asks_for_a_gpu_where_the_plan_has_gpus(notebook):
    asked, assignments = gpu_requests(notebook)
    assert asked, f"{notebook} runs the model in actors or replicas"
    for plan in [*ON_GPUS.values(), ON_CPUS]:
        namespace = {"plan": plan, "budget": per_gpu_batches(GPU_BUDGET, plan), "gpus_per_replica": gpus_per_replica}
        for assignment in assignments:  # the names a request reads (model_gpus = gpus_per_replica(plan, ...))
            names = {n.id for n in ast.walk(assignment.value) if isinstance(n, ast.Name)}
            if names <= set(namespace) | {"replicas_at_once"}:
                try:  # an assignment that reads what the notebook computed (a load test's table) is not a request's
                    exec(compile(ast.Module(body=[assignment], type_ignores=[]), notebook, "exec"), namespace)  # noqa: S102
                except (KeyError, IndexError, AttributeError, TypeError):
                    continue
        for name, request in asked.items():
            gpus = eval(compile(ast.Expression(request), notebook, "eval"), namespace) if request else 0  # noqa: S307
            if plan.use_gpu:
                assert gpus > 0, f"{notebook}: {name} runs the model on a CPU of a GPU cluster ({plan})"
                if plan.num_actors >= 2:
                    assert gpus == 1, f"{notebook}: {name} asks for {gpus} GPU where the cluster has one for each"
            else:
                assert gpus == 0, f"{notebook}: {name} asks for a GPU the cluster does not have"


def test_replicas_side_by_side_share_a_single_gpu_and_get_one_each_where_there_are_enough():
    assert gpus_per_replica(ON_GPUS[1], 2) == 0.5 and gpus_per_replica(ON_GPUS[2], 2) == 1
    assert gpus_per_replica(ON_GPUS[8], 2) == 1 and gpus_per_replica(ON_CPUS, 2) == 0


# --- notebook 04's baseline ------------------------------------------------------------------------------------------


class FakeRay:
    """Records what a cell asks Ray for; runs a task's function as Ray would, elsewhere (here: at once)."""

    def __init__(self) -> None:
        self.asked: list[dict] = []

    def remote(self, **options):
        self.asked.append(options)

        def wrap(function):
            return SimpleNamespace(remote=lambda *a, **k: ("ran remotely", function(*a, **k)))

        return wrap

    def get(self, pair):
        where, value = pair
        assert where == "ran remotely"
        return value | {"where": "a task"}


def run_baseline(plan: Plan) -> tuple[dict, FakeRay]:
    """Notebook 04's statements that train the plain-PyTorch baseline (after its definitions), with a fake Ray and a
    ``train_plain`` that says where it ran."""
    cells = [tree for _, tree in code_of(ROOT / "notebooks" / "04_cifar10_pytorch_to_ray.ipynb")]
    cell = next(t for t in cells if any(isinstance(n, ast.FunctionDef) and n.name == "train_plain" for n in t.body))
    statements = [n for n in cell.body if not isinstance(n, ast.FunctionDef | ast.Import | ast.ImportFrom)]
    statements = [n for n in statements if not isinstance(n, ast.Assert) and not isinstance(n, ast.Expr)]
    fake = FakeRay()
    here = {"calls": 0}

    def train_plain():
        here["calls"] += 1
        return {"accuracy": 1.0, "val_loss": 0.0, "where": "this process"}

    import time

    namespace = {"plan": plan, "ray": fake, "train_plain": train_plain, "time": time}
    exec(compile(ast.Module(body=statements, type_ignores=[]), "04", "exec"), namespace)  # noqa: S102
    return namespace["plain"], fake


def test_the_gpu_budgets_baseline_trains_where_a_gpu_is():
    """The notebook's process runs on the head node, which often has no GPU: with GPUs, the baseline is a Ray task
    that asks for one; on CPUs it stays in the notebook's process."""
    plain, fake = run_baseline(ON_GPUS[1])
    assert plain["where"] == "a task" and fake.asked == [{"num_gpus": 1}], (plain, fake.asked)
    plain, fake = run_baseline(ON_CPUS)
    assert plain["where"] == "this process" and fake.asked == [], "on CPUs the baseline trains in this process"
    assert "wall_s" in plain


# --- the data path on a GPU ------------------------------------------------------------------------------------------


def test_cifar_loaders_pin_memory_on_a_gpu_and_keep_no_float32_copy_of_the_split(monkeypatch):
    uri = str(config.DATA_DIR / STANDIN_CIFAR10)
    monkeypatch.setattr(resources, "pin_memory", lambda: True)
    train_loader, valid_loader = cifar.loaders(uri, 16, 64, 32)
    assert train_loader.pin_memory and valid_loader.pin_memory
    dataset = train_loader.dataset
    held = [value for value in vars(dataset).values() if isinstance(value, np.ndarray | torch.Tensor)]
    assert held and all(value.dtype in (np.uint8, np.int64, torch.uint8, torch.int64) for value in held), (
        "the split is held as read (uint8), normalised a batch at a time"
    )
    images, labels = cifar.load_split(uri, "train", 64)
    first = next(iter(torch.utils.data.DataLoader(dataset, batch_size=64)))
    assert torch.equal(first[0], torch.from_numpy(cifar.normalize(images))) and torch.equal(
        first[1], torch.from_numpy(labels.astype(np.int64))
    )
    monkeypatch.setattr(resources, "pin_memory", lambda: False)
    assert not cifar.loaders(uri, 16, 64, 32)[0].pin_memory


def test_hugging_face_workers_decode_images_in_loader_processes_on_a_gpu(fake_gpu, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 96)
    fake_gpu((9, 0), count=8)
    assert resources.loader_workers() == 4
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    fake_gpu((7, 5), count=1)  # Colab's free tier: 2 vCPUs, a T4
    assert resources.loader_workers() == 1
    monkeypatch.setattr(train, "loader_workers", lambda: 3)
    monkeypatch.setattr(train, "precision_args", lambda: {"use_cpu": True})
    args = train.worker_training_args("/tmp/x", 8, 10, 5, 8, 1e-3)
    assert args.dataloader_num_workers == 3


def test_every_dataloader_of_the_course_says_whether_it_pins_memory():
    """A ``DataLoader`` without ``pin_memory=`` copies its batches to a GPU from pageable memory: slower, and never
    overlapped with the computation. Each one asks ``resources.pin_memory()`` (false on a CPU)."""
    unpinned = [
        f"{where}, line {node.lineno}"
        for where, tree in course_code()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and dotted(node.func).split(".")[-1] == "DataLoader"
        and not any(keyword.arg == "pin_memory" for keyword in node.keywords)
    ]
    assert not unpinned, f"DataLoaders without pin_memory=: {unpinned}"


def test_no_loader_processes_on_a_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resources.loader_workers() == 0 and not resources.pin_memory()


def test_the_fine_tunes_give_every_gpu_a_full_batch():
    for gpus, plan in ON_GPUS.items():
        budget = per_gpu_batches(GPU_BUDGET, plan)
        assert budget.beans.batch_size // plan.num_workers == GPU_BUDGET.beans.batch_size, gpus
        assert budget.dogs.batch_size // plan.num_workers == GPU_BUDGET.dogs.batch_size, gpus
    assert per_gpu_batches(GPU_BUDGET, ON_CPUS) == GPU_BUDGET  # CPUs: the global batch, split
    assert per_gpu_batches(GPU_BUDGET, ON_GPUS[1]) == GPU_BUDGET  # one GPU: as the budget says


@pytest.mark.parametrize("section", ["beans", "dogs"])
def test_more_gpus_take_fewer_larger_steps_and_see_about_the_same_images(section):
    """8 or 16 GPUs each get a full batch and finish sooner: about the images (epochs) of one GPU, never fewer than
    MIN_STEPS_ON_GPUS steps, never more images than one GPU sees times the GPUs; 02b still crashes between its second
    and third checkpoint."""
    one = getattr(GPU_BUDGET, section)
    for gpus in (2, 8, 16):
        knobs = getattr(per_gpu_batches(GPU_BUDGET, ON_GPUS[gpus]), section)
        assert resources.MIN_STEPS_ON_GPUS <= knobs.train_steps <= one.train_steps, (gpus, knobs)
        images, images_on_one = knobs.train_steps * knobs.batch_size, one.train_steps * one.batch_size
        assert images_on_one * 0.9 <= images <= images_on_one * gpus / 2, (gpus, images, images_on_one)
        assert knobs.train_steps / knobs.eval_steps == pytest.approx(one.train_steps / one.eval_steps, rel=0.1)
        crash_at_step = knobs.eval_steps * 2 + knobs.eval_steps // 2  # notebook 02b's
        assert knobs.eval_steps * 2 < crash_at_step < min(knobs.eval_steps * 3, knobs.train_steps), (gpus, knobs)


def test_no_actor_or_replica_that_loads_the_model_downloads_its_whole_checkpoint():
    """``checkpoint.as_directory()`` fetches a whole checkpoint from a bucket, the optimizer's state with the weights
    (twice their size): in a class that loads the model, once for every actor or replica. They go through
    ``inference.model_folder``, which leaves the training state behind."""
    classes = [
        (where, node)
        for where, tree in course_code()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and loads_a_model(node)
    ]
    assert len(classes) >= 3, classes  # 03's ImageClassifier, its exercise's, 06's deployments
    whole = [
        f"{where}: {cls.name}"
        for where, cls in classes
        if any(isinstance(n, ast.Call) and dotted(n.func).endswith("as_directory") for n in ast.walk(cls))
    ]
    assert not whole, f"classes that load the model from the whole checkpoint: {whole}"


def test_inference_downloads_the_weights_not_the_optimizer_state_from_a_bucket(tmp_path):
    folder = tmp_path / "run" / "checkpoint_000001" / inference.HF_FOLDER
    folder.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "preprocessor_config.json", "optimizer.pt", "scheduler.pt"):
        (folder / name).write_text(name)
    (folder / "rng_state.pth").write_text("rng")
    bucket = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())  # not the local filesystem: a "bucket"
    checkpoint = Checkpoint("run/checkpoint_000001", filesystem=bucket)
    with inference.model_folder(checkpoint) as downloaded:
        got = sorted(p.name for p in downloaded.iterdir())
        assert (downloaded / "config.json").read_text() == "config.json"
    assert got == ["config.json", "model.safetensors", "preprocessor_config.json"], got
    local = Checkpoint(str(tmp_path / "run" / "checkpoint_000001"))
    with inference.model_folder(local) as here:  # on this machine's disk: read where it is
        assert here == folder
