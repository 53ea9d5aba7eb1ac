"""Each lesson's GPU memory and time, estimated from its budget, its plan and the models' sizes: what ``make doctor``
prints for the cluster it sees, and the plan it refuses where the memory does not fit one GPU (docs/instructors.md,
"The gpu budget"). Estimates, not measurements: no GPU has run them here.

A lesson's record (``course.lessons``) names what it runs on each GPU (its ``gpu_work``: one of the functions below,
which give a :class:`GpuWork` per model it puts on a GPU); :func:`gpu_estimates` sizes each on a GPU, with the models'
:class:`Shape`, and :func:`refit` names the setting that makes a work that does not fit, fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from course.lessons import Lesson

# --- what each lesson runs on a GPU: its record's ``gpu_work`` -------------------------------------------------------

# Images the lessons pass through a model, from the data sets (their real sizes; the stand-ins are smaller).
CIFAR10_TRAIN = 50_000
DOGS_FISH_VAL = 782  # imagenette's validation images of its English springers and tenches


@dataclass(frozen=True)
class GpuWork:
    """What a lesson runs on each GPU it uses: one model, at one batch, for so many images (its record's ``gpu_work``;
    ``make doctor`` estimates each one's memory and time: :func:`gpu_estimates`)."""

    what: str  # "fine-tune", "train", "serve", "batch inference"
    model: str  # a key of the shapes: "pretrained" (the sources' model), "cifar" (04's ViT), "linear"
    batch: int  # images per GPU per forward pass
    images: int  # images each GPU passes through the model, all steps and epochs together
    training: bool  # forward and backward with AdamW, or forward only
    precision: str  # "mixed" (bf16 or fp16, as the GPU has them) or "fp32"
    runs_as: str  # a key of START_S
    setting: str  # the budget's knob that sets `batch`, as course/budget.py spells it: named when it does not fit
    per_setting: int = 1  # GPUs the setting's batch is split over (a global batch); 1: the setting is per GPU
    copies: int = 1  # models side by side on one GPU (06's two deployments on a single GPU)
    shards: int = 1  # GPUs its weights, gradients and optimizer state are sharded over (FSDP2: each holds 1/shards)


def fine_tune(budget: Any, plan: Any, section: str = "beans", where: str = "Ray Train") -> GpuWork:
    """A fine-tune of the pretrained model on each GPU, sized by the budget's ``section`` (beans: 01, 02, 02b; dogs:
    03); ``where`` is "Ray Train" (the budget as the notebook grows it on GPUs: ``resources.per_gpu_batches``) or
    "one process" (01: the budget's own batch and steps, on its one GPU)."""
    from course.resources import per_gpu_batches  # here, not above: resources imports torch and Ray

    if where == "one process":
        knobs, workers = getattr(budget, section), 1
    else:
        knobs, workers = getattr(per_gpu_batches(budget, plan), section), plan.num_workers
    return GpuWork(
        "fine-tune",
        "pretrained",
        knobs.batch_size // workers,
        knobs.train_steps * knobs.batch_size // workers,
        True,
        "mixed",
        where,
        f"{section}.batch_size",
    )


def dogs_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
    """03: the dogs fine-tune on Ray Train, then batch inference on an actor per GPU."""
    inference = GpuWork(
        "batch inference",
        "pretrained",
        budget.dogs.inference_batch_size,
        -(-DOGS_FISH_VAL // plan.num_actors),
        False,
        "fp32",
        "actors",
        "dogs.inference_batch_size",
    )
    return [fine_tune(budget, plan, "dogs"), inference]


def cifar_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
    """04: the baseline on one GPU, then the same training on Ray Train, fed by a DataLoader and by Ray Data."""
    c, workers = budget.cifar, plan.num_workers
    train = (c.train_size or CIFAR10_TRAIN) * c.epochs
    baseline = GpuWork(
        "train (plain PyTorch, one GPU)", "cifar", c.batch_size, train, True, "fp32", "one process", "cifar.batch_size"
    )
    distributed = [
        GpuWork(
            f"train ({how})",
            "cifar",
            c.batch_size // workers,
            train // workers,
            True,
            "fp32",
            "Ray Train",
            "cifar.batch_size",
            per_setting=workers,
        )
        for how in ("Ray Train", "Ray Data")
    ]
    return [baseline, *distributed]


def fsdp_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
    """04b: the same ViT with DDP (a whole copy per GPU), then with FSDP2 (1/N of its state per GPU, N the workers),
    then resumed on one GPU."""
    f, workers = budget.fsdp, plan.num_workers
    steps = f.epochs * (f.train_size // f.batch_size)
    per_gpu = f.batch_size // workers
    ddp = GpuWork(
        "train (DDP)",
        "fsdp",
        per_gpu,
        f.compare_steps * per_gpu,
        True,
        "fp32",
        "Ray Train",
        "fsdp.batch_size",
        per_setting=workers,
    )
    fsdp = GpuWork(
        "train (FSDP2)",
        "fsdp",
        per_gpu,
        steps * per_gpu,
        True,
        "fp32",
        "Ray Train",
        "fsdp.batch_size",
        per_setting=workers,
        shards=workers,
    )
    resumed = GpuWork(  # one worker takes the whole batch (the training function divides it by the world size)
        "train (FSDP2, resumed on 1 GPU)",
        "fsdp",
        f.batch_size,
        f.resume_steps * f.batch_size,
        True,
        "fp32",
        "Ray Train",
        "fsdp.batch_size",
    )
    return [ddp, fsdp, resumed]


def playbook_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
    """05: the linear model of the playbook's training runs (XGBoost and TensorFlow run on CPUs)."""
    p = budget.playbook
    rows = p.rows * p.epochs // plan.num_workers
    return [GpuWork("train (linear)", "linear", p.batch_size, rows, True, "fp32", "Ray Train", "playbook.batch_size")]


def serve_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
    """06: the fine-tuned model served; two deployments share a GPU where there is only one."""
    s = budget.serve
    requests = 3 * s.load_requests + DOGS_FISH_VAL  # two load tests, the scaling load (about), every held-out
    per_replica = requests // min(plan.num_actors, s.max_replicas)
    copies = 2 if plan.num_actors < 2 else 1
    setting = "serve.max_batch_size"
    return [GpuWork("serve", "pretrained", s.max_batch_size, per_replica, False, "fp32", "actors", setting, 1, copies)]


def tune_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
    """07: every search's trials, a trial per GPU at most, at the largest batch the search may choose."""
    t, gpus = budget.tune, max(1, plan.num_workers)
    searched = t.samples * t.epochs * t.train_size + t.train_samples * t.train_epochs * t.train_size
    batch = max(*t.batch_sizes, budget.cifar.batch_size)
    what, where = "tune (a trial per GPU, at most)", "Ray Train"
    return [GpuWork(what, "cifar", batch, searched // gpus, True, "fp32", where, "cifar.batch_size")]


# --- a work's memory and time on one GPU -----------------------------------------------------------------------------

CONTEXT_GIB = 0.5  # what CUDA and torch's kernels take on a GPU before any tensor
EFFICIENCY = 0.3  # the share of a GPU's dense peak that training these models reaches (the seeds' T4: 0.27)
STEP_FLOOR_S = 0.015  # the least a training step takes: small models on big GPUs wait on kernel launches
START_S = {"one process": 5.0, "Ray Train": 10.0, "actors": 10.0}  # loading the model, starting workers


@dataclass(frozen=True)
class Shape:
    """What the estimates need of a model: its parameters, and for a transformer its depth, tokens, width, heads."""

    parameters: int
    layers: int = 0
    tokens: int = 1
    hidden: int = 0
    heads: int = 1

    @classmethod
    def vit(cls, image: int, patch: int, layers: int, hidden: int, heads: int, mlp: int, classes: int) -> Shape:
        tokens = (image // patch) ** 2 + 1
        per_layer = 4 * hidden * hidden + 2 * hidden * mlp + 9 * hidden + mlp  # attention, MLP, their biases, norms
        embedding = 3 * patch * patch * hidden + (tokens + 1) * hidden
        return cls(layers * per_layer + embedding + hidden * (classes + 2), layers, tokens, hidden, heads)

    def activation_bytes(self, bytes_per_value: int) -> float:
        """Per image, what training keeps for the backward pass (Korthikanti et al. 2022, no recomputation:
        ``tokens * hidden * (34 + 5 * heads * tokens / hidden)`` bytes per layer in 16 bits, twice in fp32)."""
        if not self.layers:
            return 0.0
        per_layer = self.tokens * self.hidden * (34 + 5 * self.heads * self.tokens / self.hidden)
        return self.layers * per_layer * bytes_per_value / 2

    def forward_flops(self) -> float:
        """Per image: the matrix products (2 per parameter per token) and attention's two (4 * tokens^2 * hidden)."""
        return 2 * self.parameters * self.tokens + 4 * self.layers * self.tokens**2 * self.hidden


@dataclass(frozen=True)
class GpuEstimate:
    """One :class:`GpuWork` on one GPU: memory in GiB by part, and seconds."""

    work: GpuWork
    parameters_gib: float  # the weights (fp32)
    optimizer_gib: float  # their gradients and AdamW's two moments (training only)
    activations_gib: float  # at the work's batch
    total_gib: float  # the three, and CUDA's context
    seconds: float
    largest_batch: int  # the largest batch per GPU that fits this GPU

    @property
    def fits(self) -> bool:
        return self.work.batch <= self.largest_batch


def _bytes(work: GpuWork) -> int:
    return 4 if work.precision == "fp32" else 2


def _per_image_gib(work: GpuWork, shape: Shape) -> float:
    if work.training:
        return shape.activation_bytes(_bytes(work)) / 2**30
    return 2 * shape.activation_bytes(_bytes(work)) / max(1, shape.layers) / 2**30  # forward: about a layer at a time


def estimate(work: GpuWork, shape: Shape, gpu: Any) -> GpuEstimate:
    """``work`` on one ``gpu`` (a ``course.resources.Gpu``): what it holds, and how long it computes."""
    parameters = work.copies * shape.parameters * 4 / 2**30 / work.shards
    optimizer = work.copies * shape.parameters * 12 / 2**30 / work.shards if work.training else 0.0
    per_image = work.copies * _per_image_gib(work, shape)
    fixed = CONTEXT_GIB + parameters + optimizer
    largest = int((gpu.memory_gib - fixed) / per_image) if per_image else 1 << 20
    flops = work.images * shape.forward_flops() * (3 if work.training else 1)
    peak = (gpu.tflops_32 if work.precision == "fp32" else gpu.tflops_16) * 1e12
    steps = work.images / max(1, work.batch)
    seconds = START_S[work.runs_as] + max(flops / (peak * EFFICIENCY), steps * STEP_FLOOR_S)
    activations = work.batch * per_image
    return GpuEstimate(work, parameters, optimizer, activations, fixed + activations, seconds, largest)


def gpu_work(lesson: Lesson, budget: Any, plan: Any) -> list[GpuWork]:
    """What ``lesson`` runs on each GPU of ``plan`` with ``budget`` (as ``course.budget.get_budget`` gives it: the
    record grows its batches as its notebook does), from its record's ``gpu_work``; none on a plan without GPUs."""
    return lesson.gpu_work(budget, plan) if plan.use_gpu else []


def gpu_estimates(lesson: Lesson, budget: Any, plan: Any, gpu: Any, shapes: dict[str, Shape]) -> list[GpuEstimate]:
    """:func:`estimate` of each of ``lesson``'s :func:`gpu_work` on ``gpu``, with the models' ``shapes``."""
    return [estimate(work, shapes[work.model], gpu) for work in gpu_work(lesson, budget, plan)]


def gpu_summary(estimates: list[GpuEstimate]) -> tuple[float, float]:
    """(GiB at the peak on one GPU, seconds in all) of a lesson's estimates."""
    return max((e.total_gib for e in estimates), default=0.0), sum(e.seconds for e in estimates)


def refit(estimate: GpuEstimate) -> str:
    """The setting that makes ``estimate`` fit its GPU, and how."""
    work = estimate.work
    if estimate.largest_batch < 1:
        return f"{work.what} does not fit this GPU even at a batch of 1: a GPU with more memory, or COURSE_BUDGET=cpu"
    most = max(1, estimate.largest_batch) * work.per_setting
    split = f" ({estimate.largest_batch} per GPU on {work.per_setting} GPUs)" if work.per_setting > 1 else ""
    return f"set {work.setting} of the gpu budget (course/budget.py) to {most} or less{split}"
