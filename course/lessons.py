"""The lessons, one record each: everything the course's tools know about a lesson, in one place.

``make run``'s table, ``make doctor``'s plan, ``make bench``, the notebooks' first cells (:func:`describe`), their
headline (``results.record``) and the tests all read :data:`LESSONS`. Adding a lesson is a notebook, its solutions,
its exercise checks and one record here (docs/development.md, "Add a lesson"); a notebook without a record, or a
record without a notebook, fails ``tests/unit/test_lessons.py`` with what to add.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from course import config
from course.config import BUDGET_ENV, SECTIONS, SMOKE_ENV, SOURCES_ENV, Budget, Sources


@dataclass(frozen=True)
class Claim:
    """What one of a lesson's measurements shows, held by a test (tests/lessons/test_what_they_show.py) on the figures
    its run recorded (``results.record``): ``larger`` is at least ``factor`` times ``smaller`` (or times 1, without
    ``smaller``). Ratios only, never absolute times, and a factor with room for a loaded machine."""

    says: str  # the effect, as the lesson's text names it
    larger: str  # a figure of the lesson's record
    factor: float
    smaller: str | None = None  # another figure of the record

    def holds(self, figures: dict[str, float]) -> bool:
        return figures[self.larger] >= self.factor * (figures[self.smaller] if self.smaller else 1.0)

    def __str__(self) -> str:
        than = f"{self.factor:g} x {self.smaller}" if self.smaller else f"{self.factor:g}"
        return f"{self.says}: {self.larger} >= {than}"


@dataclass(frozen=True)
class Lesson:
    """One lesson: its notebook, what it shows, what it must reach, and what it reads."""

    notebook: str  # the notebook's name without .ipynb, in notebooks/ and solutions/: "03_ray_data"
    title: str  # what it teaches, in a few words
    headline: str  # the one figure it records (results.record), by name
    floor: float  # the least that figure may be: below it the model did not learn enough
    exercises: tuple[str, ...]  # its exercises' ids, in order: ("03.1", "03.2")
    budget: str  # the section of config.Budget that holds its knobs ("dogs": budget.dogs)
    reads: tuple[str, ...] = ()  # other lessons' sections it reads too (07 starts from 04's choices: "cifar")
    shared: tuple[str, ...] = ()  # the fields every lesson shares that it reads too (config.Budget.shared)
    sources: tuple[str, ...] = ()  # what it reads from config.Sources
    # modules it imports beyond the course's own dependencies (pyproject.toml's extras), checked by require_sources
    packages: tuple[str, ...] = ()
    plan: Callable[[Any, Any], str] = lambda budget, plan: ""  # what it asks Ray for (make doctor), from budget, plan
    # what it runs on each GPU of a plan with GPUs, from the budget and the plan: the GpuWork below, whose memory and
    # time make doctor estimates for the cluster's GPU (gpu_estimates)
    gpu_work: Callable[[Any, Any], list[GpuWork]] = lambda budget, plan: []
    reference_seconds: int = 60  # a fresh clone's `make run` of it on the reference machine (2 cores; make doctor)
    runs_in_browser: bool = True  # run by the browser test (notebook 06 has its own: tests/lessons/test_serve.py)
    # the floor with COURSE_SOURCES=real (None: the same), argued from the model and the real data, not measured here:
    # the rehearsal's content is drawn and its weights random (docs/instructors.md)
    real_floor: float | None = None
    # with COURSE_SOURCES=real, the cpu budget's run of it at the real model's and images' sizes (the real-sources
    # rehearsal on the reference machine: tests/support/real_sources_rehearsal.py prints it; None: as reference_seconds)
    real_reference_seconds: int | None = None
    claims: tuple[Claim, ...] = ()  # what its measurements show, each held by a test on the figures it records

    def floor_for(self, sources: str) -> float:
        """The floor with ``sources`` (``"standin"`` or ``"real"``)."""
        return self.real_floor if sources == "real" and self.real_floor is not None else self.floor

    def reference_seconds_for(self, sources: str) -> int:
        """Its time on the reference machine with the cpu budget and ``sources`` (``"standin"`` or ``"real"``)."""
        real = sources == "real" and self.real_reference_seconds is not None
        return self.real_reference_seconds if real else self.reference_seconds

    @property
    def number(self) -> str:
        """``"03"`` for ``03_ray_data``: the prefix of its exercises' ids."""
        return self.notebook.split("_", 1)[0]

    @property
    def exercises_module(self) -> str:
        """The module of its exercise checks: ``course.exercises.ray_data`` for ``03_ray_data``."""
        return f"course.exercises.{self.notebook.split('_', 1)[1]}"


# --- what each lesson runs on a GPU: its record's ``gpu_work`` (estimated below) ----------

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
    setting: str  # the budget's knob that sets `batch`, as config.py spells it: named when it does not fit
    per_setting: int = 1  # GPUs the setting's batch is split over (a global batch); 1: the setting is per GPU
    copies: int = 1  # models side by side on one GPU (06's two deployments on a single GPU)


def _fit(budget: Any, plan: Any, section: str = "beans", where: str = "Ray Train") -> GpuWork:
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


def _dogs_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
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
    return [_fit(budget, plan, "dogs"), inference]


def _cifar_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
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


def _playbook_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
    """05: the linear model of the playbook's training runs (XGBoost and TensorFlow run on CPUs)."""
    p = budget.playbook
    rows = p.rows * p.epochs // plan.num_workers
    return [GpuWork("train (linear)", "linear", p.batch_size, rows, True, "fp32", "Ray Train", "playbook.batch_size")]


def _serve_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
    """06: the fine-tuned model served; two deployments share a GPU where there is only one."""
    s = budget.serve
    requests = 3 * s.load_requests + DOGS_FISH_VAL  # two load tests, the scaling load (about), every held-out
    per_replica = requests // min(plan.num_actors, s.max_replicas)
    copies = 2 if plan.num_actors < 2 else 1
    setting = "serve.max_batch_size"
    return [GpuWork("serve", "pretrained", s.max_batch_size, per_replica, False, "fp32", "actors", setting, 1, copies)]


def _tune_on_gpus(budget: Any, plan: Any) -> list[GpuWork]:
    """07: every search's trials, a trial per GPU at most, at the largest batch the search may choose."""
    t, gpus = budget.tune, max(1, plan.num_workers)
    searched = t.samples * t.epochs * t.train_size + t.train_samples * t.train_epochs * t.train_size
    batch = max(*t.batch_sizes, budget.cifar.batch_size)
    what, where = "tune (a trial per GPU, at most)", "Ray Train"
    return [GpuWork(what, "cifar", batch, searched // gpus, True, "fp32", where, "cifar.batch_size")]


def _workers(plan: Any) -> str:
    return f"{plan.num_workers} Ray Train worker(s) ({'1 GPU each' if plan.use_gpu else 'CPU'})"


def _beans(budget: Any) -> str:
    return f"beans {budget.beans.train_steps} steps of batch {budget.beans.batch_size}"


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        notebook="00_ray_core",
        title="Ray Core: tasks, actors, resources, the runtime env, failures",
        headline="share of tasks that ran side by side",
        floor=0.5,
        exercises=("00.1", "00.2"),
        budget="core",
        shared=("max_actors",),
        plan=lambda b, p: (
            f"Ray Core, {b.core.tasks} tasks at once, a {b.core.array_mb} MB array in the object store, "
            f"{b.max_actors} actors in a pool (CPU only)"
        ),
        reference_seconds=25,  # timed 2026-11-25 (the others 2026-11-24, with the doctor's probe)
        real_reference_seconds=31,  # the real-sources rehearsal, 2026-11-25
        claims=(
            Claim("tasks side by side finish well before the loop", "speedup", 1.5),
            Claim("the actor pool hands batches to every actor", "least_batches_per_scorer", 1.0),
        ),
    ),
    Lesson(
        notebook="01_local_finetune",
        title="fine-tune a ViT on one machine (Hugging Face Trainer)",
        headline="beans val accuracy",
        floor=0.80,
        # DeiT-tiny (ImageNet-1k, 72 % top-1) fine-tuned 1.2 epochs on the 1034 photos; ViT-B/16 reaches about 0.98 on
        # beans' validation split after 5 epochs (the Hub's vit-base-beans). Chance is 0.33.
        real_floor=0.75,
        exercises=("01.1", "01.2"),
        budget="beans",
        shared=("eval_batch_size", "max_workers"),
        sources=("beans", "model"),
        plan=lambda b, p: f"one process, {_beans(b)}",
        gpu_work=lambda b, p: [_fit(b, p, where="one process")],  # one process, its one GPU
        reference_seconds=33,
        real_reference_seconds=115,  # the real-sources rehearsal, 2026-11-25
    ),
    Lesson(
        notebook="02_ray_train_finetune",
        title="the same fine-tune on Ray Train",
        headline="beans val accuracy",
        floor=0.80,
        real_floor=0.75,  # as 01: the same fine-tune, split over the workers
        exercises=("02.1", "02.2"),
        budget="beans",
        shared=("eval_batch_size", "max_workers"),
        sources=("beans", "model"),
        plan=lambda b, p: f"{_workers(p)}, {_beans(b)}",
        gpu_work=lambda b, p: [_fit(b, p)],
        reference_seconds=53,
        real_reference_seconds=164,  # the real-sources rehearsal, 2026-11-25
    ),
    Lesson(
        notebook="02b_fault_tolerance",
        title="a worker dies, training goes on",
        headline="beans val accuracy after a restart",
        floor=0.80,
        real_floor=0.75,  # as 01: the restart resumes from the last checkpoint, so no step is lost
        exercises=("02b.1",),
        budget="beans",
        shared=("eval_batch_size", "max_workers"),
        sources=("beans", "model"),
        plan=lambda b, p: f"{_workers(p)}, {_beans(b)}, one worker killed on purpose",
        gpu_work=lambda b, p: [_fit(b, p)],
        reference_seconds=51,
        real_reference_seconds=159,  # the real-sources rehearsal, 2026-11-25
    ),
    Lesson(
        notebook="03_ray_data",
        title="Ray Data: ingest, featurize, train from shards, batch inference",
        headline="dogs-vs-fish held-out accuracy",
        # Chance is 0.5. Measured at the course size: 0.920 on some builds of the stand-ins, 0.875 on others (three runs
        # of one build, 2026-11-29), 0.870 on the gpu budget: the stand-in ViT's pretraining differs a little from one
        # machine to the next, and so does what its fine-tune reaches. 0.80 is learning beyond doubt on 200 images.
        floor=0.80,
        # both classes (English springer, tench) are ImageNet-1k classes the pretrained model already tells apart;
        # a fine-tune of 60 steps keeps that.
        real_floor=0.90,
        exercises=("03.1", "03.2"),
        budget="dogs",
        shared=("eval_batch_size", "max_workers", "max_actors"),
        sources=("imagenette", "imagenette_labels", "model"),
        plan=lambda b, p: f"{_workers(p)}, dogs {b.dogs.train_steps} steps; {p.num_actors} inference actor(s)",
        gpu_work=_dogs_on_gpus,
        reference_seconds=73,
        real_reference_seconds=277,  # the real-sources rehearsal, 2026-11-25
        # the classifier's pool (section 6): 2 actors on this machine, 200 held-out images in batches of 64
        claims=(
            Claim(
                "the pool labels more batches than it loads the model", "classifier_batches", 1.5, "classifier_loads"
            ),
        ),
    ),
    Lesson(
        notebook="04_cifar10_pytorch_to_ray",
        title="CIFAR-10: plain PyTorch, then Ray Train, then Ray Data",
        headline="CIFAR-10 val accuracy (Ray Data)",
        floor=0.50,
        # real CIFAR-10 is harder than the drawn shapes: a small ViT trained from scratch for 2 epochs on 4,000 images
        # reaches about 0.3-0.4 (ViTs need many epochs on CIFAR); the gpu budget's 10 epochs on 50,000, about 0.7.
        # Chance is 0.10.
        real_floor=0.25,
        exercises=("04.1", "04.2"),
        budget="cifar",
        shared=("max_workers",),
        sources=("cifar10",),
        plan=lambda b, p: (
            f"{_workers(p)}, ViT {b.cifar.architecture}, {b.cifar.epochs} epochs of "
            f"{b.cifar.train_size or 'all'} images"
        ),
        gpu_work=_cifar_on_gpus,
        reference_seconds=83,
        real_reference_seconds=147,  # the real-sources rehearsal, 2026-11-25
        # what the three ways cost in time depends on the machine's load (on a busy 2-core machine the plain loop was
        # the slowest once): the table's claim is that they learn about as well
        claims=(
            Claim("Ray Train learns about as well as the plain loop", "ray_train_accuracy", 0.85, "plain_accuracy"),
            # map against map_batches on 1,000 images: the text says the gap is small at this size, either way round
            Claim("at this size, map is not far ahead of map_batches", "map_s", 1 / 3, "map_batches_s"),
            Claim("at this size, map_batches is not far ahead of map", "map_batches_s", 1 / 3, "map_s"),
        ),
    ),
    Lesson(
        notebook="05_data_loading_playbook",
        title="the data-loading playbook: DataConfig, caching, shuffling, other trainers",
        headline="XGBoost val accuracy",
        floor=0.90,
        exercises=("05.1", "05.2"),
        budget="playbook",
        shared=("max_workers",),
        sources=("cifar10",),
        packages=("xgboost",),  # TensorFlow too where it has wheels: the notebook skips its step without it
        plan=lambda b, p: f"{_workers(p)}, {b.playbook.rows} rows, XGBoost and TensorFlow",
        gpu_work=_playbook_on_gpus,
        reference_seconds=114,
        real_reference_seconds=175,  # the real-sources rehearsal, 2026-11-25
        claims=(
            Claim(
                "a materialized epoch skips the costly step a lazy one runs again",
                "lazy_epoch_s",
                2.0,
                "cached_epoch_s",
            ),
            Claim(
                "a full shuffle's batch draws from many more blocks", "full_shuffle_blocks", 2.5, "local_shuffle_blocks"
            ),
            Claim("four collates side by side wait less than one", "prefetch_wait_0_s", 2.0, "prefetch_wait_4_s"),
            Claim(
                "a slow source streams: its first batch long before the read ends", "read_done_s", 1.5, "first_output_s"
            ),
            Claim("Ray Data does the job faster than a plain loop on this laptop", "plain_loop_s", 1.3, "streaming_s"),
        ),
    ),
    Lesson(
        notebook="06_ray_serve",
        title="serve the fine-tuned model with Ray Serve",
        headline="dogs-vs-fish accuracy served over HTTP",
        floor=0.80,  # as 03: the same fine-tune, served (0.870 to 0.920 measured)
        real_floor=0.90,  # 03's model, served
        exercises=("06.1", "06.2"),
        budget="serve",
        sources=("imagenette", "imagenette_labels", "model"),
        plan=lambda b, p: (
            f"Ray Serve, up to {b.serve.max_replicas} replica(s) "
            f"({'1 GPU each' if p.gpus_per_actor else 'CPU'}), a load test of {b.serve.load_requests} requests"
        ),
        gpu_work=_serve_on_gpus,
        reference_seconds=83,
        real_reference_seconds=152,  # the real-sources rehearsal, 2026-11-25
        runs_in_browser=False,
        claims=(
            Claim("batching answers more requests per second", "throughput_batched", 2.0, "throughput_one_by_one"),
            Claim("batching shortens the median wait", "p50_ms_one_by_one", 2.0, "p50_ms_batched"),
            # composed against batched, requests per second: 0.56, 0.82 and 1.07 in three runs of 2026-11-28; the
            # median wait 1.81 and 1.27 in two of them (the third not kept): as long or longer, never a clear gain
            Claim(
                "on a laptop, composition gains no clear throughput (at most a third more)",
                "throughput_batched",
                0.75,
                "throughput_composed",
            ),
            Claim(
                "on a laptop, a composed request waits as long or longer (at most a fifth less)",
                "p50_ms_composed",
                0.8,
                "p50_ms_batched",
            ),
            Claim(
                "under load, autoscaling runs max_replicas replicas", "running_replicas_under_load", 1.0, "max_replicas"
            ),
            # back to min_replicas: as many running as min_replicas, and none other left starting or stopping
            Claim("after the load, it is back to min_replicas", "running_replicas_after_load", 1.0, "min_replicas"),
            Claim("after the load, no replica is left but those", "min_replicas", 1.0, "replicas_after_load"),
        ),
    ),
    Lesson(
        notebook="07_ray_tune",
        title="choose the hyperparameters with Ray Tune, over Ray Train",
        headline="CIFAR-10 test accuracy, tuned",
        floor=0.25,
        real_floor=0.18,  # 800 real training images, 3 epochs from scratch: well above chance (0.10), far from 04
        exercises=("07.1", "07.2"),
        budget="tune",
        reads=("cifar",),
        sources=("cifar10",),
        plan=lambda b, p: (
            f"Ray Tune, {b.tune.samples} trials with ASHA, then {b.tune.train_samples} trials of "
            f"{b.tune.workers} Ray Train worker(s) each"
        ),
        gpu_work=_tune_on_gpus,
        reference_seconds=171,  # timed 2026-11-25
        real_reference_seconds=247,  # the real-sources rehearsal, 2026-11-25
        claims=(Claim("ASHA trains fewer epochs than every trial run to its end", "every_epoch", 1.2, "asha_epochs"),),
    ),
)


def lesson_named(notebook: str) -> Lesson:
    """The record of ``notebook`` (``"03_ray_data"``, or a path to it); an error that names the fix if none."""
    name = str(notebook).rsplit("/", 1)[-1].removesuffix(".ipynb")
    for lesson in LESSONS:
        if lesson.notebook == name:
            return lesson
    raise KeyError(
        f"no lesson named {name!r} in course/lessons.py: add a Lesson(notebook={name!r}, ...) record there "
        f"(known: {', '.join(lesson.notebook for lesson in LESSONS)})"
    )


def require_sources(notebook: str, budget: Budget | None = None) -> Sources:
    """The sources for ``budget`` (config.get_sources), with those that ``notebook`` reads (its record's ``sources``)
    checked, and only those: a lesson that needs no bucket runs where the bucket cannot be reached. In a clone, a
    stand-in that is not built is an error that says `make data`; the course installed alone (a lesson opened on its
    own) builds the stand-ins the lesson reads, beside it."""
    lesson, sources = lesson_named(notebook), config.get_sources(budget=budget)
    require_packages(lesson)
    if sources.kind == "standin" and not config.IN_A_CLONE:
        from course import build  # torch and transformers build the stand-in model: imported only here

        build.build_for(lesson.sources, config.data_folder())
    return config.require_data(sources, lesson.sources)


def require_packages(lesson: Lesson) -> None:
    """Stop with the fix where a module ``lesson`` imports beyond the course's dependencies is missing (on a hosted
    runtime, or in an environment of your own: `make setup` installs them all)."""
    import importlib.util

    missing = [name for name in lesson.packages if importlib.util.find_spec(name) is None]
    if missing:
        raise ModuleNotFoundError(
            f"{lesson.notebook} imports {', '.join(missing)}, which this environment lacks: `pip install "
            f"{' '.join(missing)}` (in a clone of the course, `make setup` installs it)"
        )


def describe(sources: Sources, budget: Budget, plan: object | None = None, lesson: str | None = None) -> str:
    """What a notebook runs with (its first cell prints it): its sources, its budget section and the shared knobs,
    the plan (all without ``lesson``). ``lesson`` is the notebook's name (``"03_ray_data"``); its record says which
    sources and section."""
    record = lesson_named(lesson) if lesson else None
    shown_sources = {
        k: v for k, v in asdict(sources).items() if k != "kind" and (record is None or k in record.sources)
    }
    sections = [record.budget, *record.reads] if record else list(SECTIONS)
    shared = {k: v for k, v in budget.shared().items() if record is None or k in record.shared}
    lines = [f"sources: {sources.kind} ({SOURCES_ENV})"] + [f"  {k:<18} {v}" for k, v in shown_sources.items()]
    smoke = budget.size == "smoke"
    size = f", at the smoke size ({SMOKE_ENV}=1: headlines are not held to their floors)" if smoke else ""
    lines += [f"budget: {budget.kind} ({BUDGET_ENV}; unset: gpu when there are GPUs){size}"]
    lines += ["  " + ", ".join(f"{k}={v}" for k, v in shared.items())] if shared else []
    for section in sections:  # budget.<section>.<knob>, as the notebook reads it
        knobs = ", ".join(f"{k}={v}" for k, v in asdict(getattr(budget, section)).items())
        lines += [f"  {section}: {knobs}"]
    if plan is not None:
        lines += [f"plan: {plan}"]
    return "\n".join(lines)


# --- each lesson's GPU memory and time, estimated from the budget and the models' sizes ------------------------------
#
# ``make doctor`` prints them for the cluster it sees and refuses a plan whose memory does not fit its GPUs
# (docs/instructors.md, "The gpu budget"). Estimates, not measurements: no GPU has run them here.

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
    parameters = work.copies * shape.parameters * 4 / 2**30
    optimizer = work.copies * shape.parameters * 12 / 2**30 if work.training else 0.0
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
    """What ``lesson`` runs on each GPU of ``plan`` with ``budget`` (as ``config.get_budget`` gives it: the record
    grows its batches as its notebook does), from its record's ``gpu_work``; none on a plan without GPUs."""
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
    return f"set {work.setting} of the gpu budget (course/config.py) to {most} or less{split}"
