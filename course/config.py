"""Course configuration, in one place: paths, the data/model sources, the budget, storage and run names.

Two settings, independent of each other:

* ``COURSE_SOURCES`` picks where data and the pretrained model come from. ``standin`` (default): small,
  offline stand-ins that ``make data`` builds in ``data/``. ``real``: the Hugging Face Hub's ``beans``
  and a pretrained image classifier (:data:`REAL_MODELS`: a small one for the cpu budget, ViT-B/16 for the gpu
  budget), CIFAR-10 and imagenette on S3 (network needed). Both go through the same code;
  ``COURSE_MODEL`` names another pretrained model than the sources' own.
* ``COURSE_BUDGET`` picks how much work the notebooks do. ``cpu`` (a laptop) or ``gpu`` (a GPU
  cluster); unset, it follows the hardware: ``gpu`` when the cluster reports GPUs. ``COURSE_SMOKE=1`` takes either
  down to the smoke size (:data:`SMOKE_KNOBS`): the same code paths, at their smallest, in minutes.

Every ``COURSE_*`` variable is declared in :mod:`course.settings` (meaning, default, allowed values) and read through
it, checked: the names below are its names. The budgets check their own rules when they are made.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from pathlib import Path

import pyarrow.fs as pafs

from course import settings

REPO_ROOT = Path(__file__).resolve().parents[1]
# A clone of the course (`make setup` installs it in place) keeps data/ and results/ in the clone. The package
# installed alone (a lesson opened on its own, on Colab say: its first cell installs it) keeps them in the working
# directory, beside the notebook.
IN_A_CLONE = (REPO_ROOT / "pyproject.toml").is_file()
HOME = REPO_ROOT if IN_A_CLONE else Path.cwd()
# Where the course's data sets are: HOME's data/ (one machine), or a folder every node of a cluster mounts.
DATA_DIR_ENV = "COURSE_DATA_DIR"
DATA_DIR = Path(settings.raw(DATA_DIR_ENV) or HOME / "data").absolute()  # checked where it is used: data_folder
# What this process writes for you to read (executed notebooks, headline figures, exercise verdicts).
RESULTS_DIR_ENV = "COURSE_RESULTS_DIR"
RESULTS_DIR = Path(settings.read(RESULTS_DIR_ENV) or HOME / "results").absolute()
# What Ray's workers write (checkpoints, predictions): results/ray, or storage every node reaches (see storage_path).
STORAGE_ENV = "COURSE_STORAGE_PATH"

SOURCES_ENV = "COURSE_SOURCES"
# The pretrained model the beans and dogs lessons (01 to 03, and 06 serving 03's) fine-tune, named once: unset, the
# stand-in (COURSE_SOURCES=standin) or REAL_MODELS[budget] (real). Any image classifier that transformers' Auto classes
# load will do, a Hub id (with COURSE_SOURCES=real: the Hub is reachable) or a `save_pretrained` folder written as a
# path (/..., ./... or ~/...).
MODEL_ENV = "COURSE_MODEL"
# The real pretrained model, by budget. cpu: DeiT-tiny (5.7 M parameters, an ImageNet-1k classifier, 224 px): a
# lesson fine-tunes it on real photos in minutes on a laptop's CPU. gpu: ViT-B/16 pretrained on ImageNet-21k (86 M
# parameters, no classification head), the course's model on a GPU.
REAL_MODELS = {"cpu": "facebook/deit-tiny-patch16-224", "gpu": "google/vit-base-patch16-224-in21k"}
REAL_BEANS = "AI-Lab-Makerere/beans"  # the Hub's beans, under its owner's name (the old id `beans` is refused)
# The public buckets' region. S3 answers only in a bucket's own region, and pyarrow takes us-east-1 where a machine has
# no AWS settings; Ray Data looks the region up itself. Another bucket's region is looked up (pyarrow.fs.from_uri).
PUBLIC_BUCKET_REGIONS = {"air-example-data-2": "us-west-2", "ray-example-data": "us-west-2"}
BUDGET_ENV = "COURSE_BUDGET"
SMOKE_ENV = "COURSE_SMOKE"
SIZES = ("course", "smoke")  # Budget.size: the lessons' own size, or the smoke size (COURSE_SMOKE=1)
VERBOSE_ENV = "COURSE_VERBOSE"
ANONYMOUS_S3 = "s3://anonymous@"  # public buckets: no credentials
BUILD_COMMAND = "make data"

# Names of the stand-ins, said plainly: they are synthetic and built by this repo.
STANDIN_BEANS = "synthetic-beans"
STANDIN_IMAGENETTE = "synthetic-imagenette-dogs-fish"
STANDIN_CIFAR10 = "synthetic-cifar10"
STANDIN_VIT = "vit-tiny-pretrained-on-synthetic-cifar10"
ARCHITECTURES = ("small", "full")  # notebook 04's ViT (helpers.vit)


@dataclass(frozen=True)
class Sources:
    """Where each data set and the pretrained model come from."""

    kind: str
    beans: str  # a local imagefolder directory, or a Hub dataset id
    model: str  # the pretrained image classifier 01 to 03 fine-tune: a `save_pretrained` folder, or a Hub model id
    imagenette: str  # URI of a folder holding train/ and val/ synset folders
    imagenette_labels: str  # URI of the labels CSV (file_name,label)
    cifar10: str  # URI of a folder holding train/ and test/ parquet files


class Checked:
    """A budget, or a section of one, that checks its rules when it is made (``replace`` and ``from_dict`` too):
    every number above 0, a learning rate at most 1, None only where the field allows it (``int | None``: all), the
    batch sizes a non-empty tuple of them; then its own (:meth:`rules`). A broken one is a ValueError that names it."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name in SECTIONS or isinstance(value, str):
                continue
            wrong = None
            if value is None:
                wrong = None if "None" in str(field.type) else "is not set (None is for a size only: all of it)"
            elif isinstance(value, (tuple, list)):
                wrong = None if value and all(_positive(v) for v in value) else "must hold numbers above 0"
            elif not _positive(value):
                wrong = "must be a number above 0"
            elif "learning_rate" in field.name and value > 1:
                wrong = "is not a learning rate (above 0, at most 1)"
            if wrong:
                self._refuse(field.name, value, wrong)
        for name, right, why in self.rules():
            if not right:
                self._refuse(name, getattr(self, name), why)

    def rules(self) -> list[tuple[str, bool, str]]:
        """The section's own rules: (field, whether it holds, what it asks)."""
        return []

    def _refuse(self, name: str, value: object, wrong: str) -> None:
        raise ValueError(
            f"{type(self).__name__}.{name}={value!r} {wrong}: fix the budget in course/config.py (or the code that "
            f"changed it)."
        )


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class CoreBudget(Checked):
    """Lesson 00, Ray Core's tasks and actors."""

    tasks: int  # calls of the lesson's slow function: a loop of them, then as many tasks at once
    task_seconds: float  # how long one call waits (it stands for a download, a query, a remote call)
    array_mb: int  # megabytes of the array that many tasks read (ray.put)


@dataclass(frozen=True)
class BeansBudget(Checked):
    """Lessons 01, 02 and 02b: the beans fine-tune (Hugging Face Trainer)."""

    train_steps: int  # optimizer steps
    batch_size: int  # global: notebook 01's one device, or split across Ray Train's workers
    eval_steps: int  # evaluate (and checkpoint) every this many steps
    learning_rate: float

    def rules(self) -> list[tuple[str, bool, str]]:
        return [("eval_steps", self.eval_steps <= self.train_steps, "must be at most train_steps")]


@dataclass(frozen=True)
class DogsBudget(Checked):
    """Lesson 03: dogs vs fish from Ray Data shards, then batch inference."""

    train_steps: int
    eval_steps: int
    batch_size: int  # global
    learning_rate: float
    shuffle_buffer: int  # rows of each worker's local shuffle buffer (iter_torch_batches)
    inference_batch_size: int  # rows per map_batches call of the featurizer and the classifier pools

    def rules(self) -> list[tuple[str, bool, str]]:
        return [("eval_steps", self.eval_steps <= self.train_steps, "must be at most train_steps")]


@dataclass(frozen=True)
class CifarBudget(Checked):
    """Lesson 04: CIFAR-10 with the plain-PyTorch ViT (lesson 07 tunes the same model)."""

    architecture: str  # "small" (CPU) or "full" (the tutorial's 14.3 M ViT), see helpers.vit
    train_size: int | None  # images of the train split to use (None: all)
    valid_size: int | None  # images of the test split to validate on (None: all)
    epochs: int
    batch_size: int  # global
    learning_rate: float
    shuffle_buffer: int  # rows of Ray Data's local shuffle buffer, per worker (iter_torch_batches)

    def rules(self) -> list[tuple[str, bool, str]]:
        return [("architecture", self.architecture in ARCHITECTURES, f"must be one of {list(ARCHITECTURES)}")]


@dataclass(frozen=True)
class PlaybookBudget(Checked):
    """Lesson 05: the data-loading playbook's small models."""

    rows: int  # CIFAR-10 rows read by the playbook's examples
    epochs: int
    batch_size: int  # per worker
    learning_rate: float
    xgboost_rounds: int
    tensorflow_epochs: int
    tensorflow_learning_rate: float
    stream_blocks_per_cpu: int  # section 10's slow source: blocks per CPU of the cluster (0.8 s of waiting each)
    waiting_batches: int  # section 4's prefetching comparison: batches of 100 ids, each collated in 0.15 s
    waiting_runs: int  # section 4: runs of each prefetch_batches setting, the median kept


@dataclass(frozen=True)
class ServeBudget(Checked):
    """Lesson 06: serving the fine-tuned model with Ray Serve."""

    max_batch_size: int  # requests a replica groups into one forward pass (@serve.batch)
    batch_wait_s: float  # how long a replica waits for more requests before it runs a smaller batch
    load_requests: int  # requests of one load test (each held-out image at most once per test)
    load_concurrency: int  # requests in flight at once during a load test: the clients
    max_replicas: int  # the most replicas autoscaling may start (each holds a copy of the model)
    upscale_delay_s: float  # how long the load must stay high before autoscaling adds a replica
    downscale_delay_s: float  # how long it must stay low before autoscaling removes one
    look_back_s: float  # the window autoscaling averages the requests in flight over (Serve wants over 10 s)
    target_ongoing_requests: int  # requests in flight per replica that autoscaling aims for
    scale_concurrency: int  # requests kept in flight at the model deployment while the autoscaling cell waits
    scale_limit_s: float  # the longest the autoscaling cell waits for the scale out, then again for the scale in

    def rules(self) -> list[tuple[str, bool, str]]:
        return [
            ("look_back_s", self.look_back_s > 10, "must be over 10 s: Ray Serve wants a longer window"),
            ("downscale_delay_s", self.downscale_delay_s >= self.upscale_delay_s, "must be at least upscale_delay_s"),
            (
                "scale_concurrency",
                self.scale_concurrency >= self.target_ongoing_requests * self.max_replicas,
                "must be at least target_ongoing_requests x max_replicas: with fewer requests in flight, Serve never "
                "wants max_replicas",
            ),
        ]


@dataclass(frozen=True)
class TuneBudget(Checked):
    """Lesson 07: choosing notebook 04's hyperparameters with Ray Tune."""

    train_size: int  # the first images of the train split: what every trial trains on
    valid_size: int  # the next images of the train split: the validation set that ranks the trials
    test_size: int | None  # images of the test split that judge the chosen model at the end (None: all)
    samples: int  # trials of the search with early stopping (ASHA), each training in its own Tune process
    epochs: int  # the most epochs a trial of that search trains (ASHA's max_t)
    train_samples: int  # trials of the search over Ray Train, each fitting a TorchTrainer
    train_epochs: int  # epochs of each of those trials
    interrupt_after: int  # trials that end before step 4's Ctrl-C (`InterruptOnce`); the ones running then stop
    workers: int  # Ray Train workers per trial (up to the cluster's GPUs where it has GPUs)
    train_trials_at_once: int | None  # at most, for memory: 4 processes with torch per trial (None: as resources allow)
    batch_sizes: tuple[int, ...]  # the batch sizes both searches choose from; notebook 04's batch is one of them

    def rules(self) -> list[tuple[str, bool, str]]:
        return [
            ("samples", self.samples >= 2, "must be at least 2: a search compares trials"),
            (
                "interrupt_after",
                1 <= self.interrupt_after < self.train_samples,
                "must be at least 1 and less than train_samples: a trial must still run when the Ctrl-C comes",
            ),
        ]


SECTIONS = {
    "core": CoreBudget,
    "beans": BeansBudget,
    "dogs": DogsBudget,
    "cifar": CifarBudget,
    "playbook": PlaybookBudget,
    "serve": ServeBudget,
    "tune": TuneBudget,
}  # a lesson's record (course.lessons) names the section it reads


@dataclass(frozen=True)
class Budget(Checked):
    """How much work each lesson does, and with how many workers: follows the hardware, not the sources.

    ``cpu`` is a laptop's budget (minutes per notebook on 2 cores); ``gpu`` is the real thing for a GPU
    cluster (the seeds' settings). The fields every lesson shares come first, then one section per lesson
    (``budget.beans.train_steps``). Every knob a notebook turns comes from here.
    """

    kind: str
    size: str  # "course", or "smoke" (COURSE_SMOKE=1: every section at SMOKE_KNOBS, the same code paths)
    max_workers: int  # Ray Train workers (one per GPU on a GPU cluster, up to this many)
    max_actors: int  # actors of a batch-inference or featurizing pool
    eval_batch_size: int  # per device, for every evaluation of the Hugging Face fine-tunes
    core: CoreBudget
    beans: BeansBudget
    dogs: DogsBudget
    cifar: CifarBudget
    playbook: PlaybookBudget
    serve: ServeBudget
    tune: TuneBudget

    def rules(self) -> list[tuple[str, bool, str]]:
        kinds = settings.declared(BUDGET_ENV).choices
        found = [("kind", self.kind in kinds, f"must be one of {list(kinds)}")]
        found += [("size", self.size in SIZES, f"must be one of {list(SIZES)}")]
        return found + [
            (name, isinstance(getattr(self, name), kind), f"must be a {kind.__name__}")
            for name, kind in SECTIONS.items()
        ]

    @classmethod
    def from_dict(cls, values: dict) -> Budget:
        """The budget that ``dataclasses.asdict`` turned into ``values`` (a Ray Train worker's ``loop_config``)."""
        return cls(**{k: SECTIONS[k](**v) if k in SECTIONS else v for k, v in values.items()})

    def shared(self) -> dict:
        """The fields every lesson shares (not a section)."""
        own = [f.name for f in fields(self) if f.name not in SECTIONS and f.name not in ("kind", "size")]
        return {name: getattr(self, name) for name in own}


def _standin_sources(data_dir: Path, budget: str) -> Sources:
    imagenette = data_dir / STANDIN_IMAGENETTE
    return Sources(
        kind="standin",
        beans=str(data_dir / STANDIN_BEANS),
        model=str(data_dir / STANDIN_VIT),
        imagenette=str(imagenette),
        imagenette_labels=str(imagenette / "labels.csv"),
        cifar10=str(data_dir / STANDIN_CIFAR10),
    )


def _real_sources(data_dir: Path, budget: str) -> Sources:
    return Sources(
        kind="real",
        beans=REAL_BEANS,
        model=REAL_MODELS[budget],
        imagenette="s3://anonymous@air-example-data-2/imagenette2",
        # imagenette ships no labels file: notebook 03 writes one from the real folders on first use (ensure_labels).
        imagenette_labels=str(data_dir / "imagenette2-labels.csv"),
        cifar10="s3://anonymous@ray-example-data/cifar10-parquet",
    )


_SOURCES = {"standin": _standin_sources, "real": _real_sources}
assert set(_SOURCES) == set(settings.declared(SOURCES_ENV).choices), "course/settings.py declares the same sources"

_CPU = Budget(
    kind="cpu",
    size="course",
    max_workers=2,
    max_actors=2,
    eval_batch_size=64,
    core=CoreBudget(tasks=8, task_seconds=0.5, array_mb=40),
    beans=BeansBudget(train_steps=300, batch_size=32, eval_steps=50, learning_rate=1e-3),
    dogs=DogsBudget(
        train_steps=300, eval_steps=50, batch_size=32, learning_rate=1e-3, shuffle_buffer=256, inference_batch_size=64
    ),
    cifar=CifarBudget(
        architecture="small",
        train_size=4000,
        valid_size=1000,
        epochs=2,
        batch_size=64,
        learning_rate=1e-3,
        shuffle_buffer=1000,
    ),
    playbook=PlaybookBudget(
        rows=2000,
        epochs=2,
        batch_size=64,
        learning_rate=0.01,
        xgboost_rounds=30,
        tensorflow_epochs=5,
        tensorflow_learning_rate=0.2,
        stream_blocks_per_cpu=3,  # 24 blocks on the local cluster: the plain loop waits 19 s, Ray Data 6 to 11
        waiting_batches=12,
        waiting_runs=3,
    ),
    serve=ServeBudget(
        max_batch_size=16,
        batch_wait_s=0.01,
        load_requests=100,
        load_concurrency=16,
        max_replicas=2,
        upscale_delay_s=2.0,
        # Serve's handles send their counts every 10 s, each a window of look_back_s: at 5 s, Serve scaled in, then
        # out again on a late report of the load, then in; at 15 s every report it scales in on is after the load
        downscale_delay_s=15.0,
        look_back_s=11.0,
        target_ongoing_requests=4,
        # 32 in flight at `Model`: Serve wants 32 / 4 = 8 replicas, max_replicas (2) caps it. A replica took 10 to 45 s
        # to start on 2 cores under that load; the replicas report every 10 s: the scale out took 20 to 60 s, the scale
        # in about 30 (course.cluster.SERVE_ENV: the replicas' own counts)
        scale_concurrency=32,
        scale_limit_s=120.0,
    ),
    tune=TuneBudget(
        train_size=800,
        valid_size=500,
        test_size=1000,
        samples=4,
        epochs=3,
        train_samples=3,  # one at a time: 2 run to their end, the third is interrupted (step 4) and resumed (step 5)
        train_epochs=2,
        interrupt_after=2,
        workers=2,
        train_trials_at_once=1,  # two at once (about 2 GB each) took the cluster past a laptop's 8 GB
        batch_sizes=(32, 64, 128),
    ),
)
# Each budget is sized for the stand-ins; with the real sources it changes as below, for the real model (REAL_MODELS).
# cpu: the real model (DeiT-tiny, 224 px) trains at about 18 images/s on 2 cores, against thousands for the stand-in
# (64 px). Fewer, smaller steps keep each lesson within about 10 minutes there: beans 80 steps of 16 (1.2 epochs of its
# 1034 photos), dogs 60 steps of 16. gpu: ViT-B/16 pretrained on ImageNet-21k needs fewer steps than the stand-in.
# A pretrained classifier fine-tunes at a lower learning rate than the stand-in's 1e-3 (at 2e-4, the stand-in on one
# H200 reached only 0.820 on beans, against a floor of 0.8).
REAL_KNOBS = {
    "cpu": {
        "beans": dict(train_steps=80, batch_size=16, eval_steps=20, learning_rate=3e-4),  # 02b crashes after 2.5 evals
        "dogs": dict(train_steps=60, eval_steps=30, batch_size=16, learning_rate=3e-4, inference_batch_size=32),
    },
    "gpu": {
        "beans": dict(train_steps=200, learning_rate=2e-4),
        "dogs": dict(train_steps=150, learning_rate=2e-4),
    },
}
_BUDGETS = {
    "cpu": _CPU,
    "gpu": replace(
        _CPU,
        kind="gpu",
        max_workers=16,
        max_actors=8,
        dogs=replace(_CPU.dogs, batch_size=64, inference_batch_size=128),
        cifar=replace(_CPU.cifar, architecture="full", train_size=None, valid_size=None, epochs=10, batch_size=512),
        playbook=replace(_CPU.playbook, rows=10_000),
        serve=replace(_CPU.serve, max_batch_size=32, load_concurrency=64, max_replicas=8, scale_concurrency=128),
        tune=replace(
            _CPU.tune,
            train_size=45_000,
            valid_size=5_000,
            test_size=None,
            samples=16,
            epochs=10,
            train_samples=8,
            train_epochs=10,
            train_trials_at_once=None,
            batch_sizes=(128, 256, 512),  # notebook 04's 512 among them: its choice is the searches' first trial
        ),
    ),
}
assert set(_BUDGETS) == set(REAL_KNOBS) == set(settings.declared(BUDGET_ENV).choices), (
    "course/settings.py declares the same budgets"
)
# The smoke size (COURSE_SMOKE=1), over either budget and either sources: every notebook runs top to bottom through
# each code path its course size takes (its devices and precision, Ray Train's checkpoints and reports, 02b's restart
# and resume, Ray Data's actor pools, Serve's deployments, autoscaling and load test, Tune's ASHA and restore), at the
# smallest sizes that still take them: a smoke test of the whole course in minutes. Its headlines are printed beside
# their floors, not held to them (course.results). "shared" holds the fields every lesson shares; every section has an
# entry, a new lesson's too (tests/unit/test_config.py says which is missing).
SMOKE_KNOBS: dict[str, dict] = {
    "shared": dict(eval_batch_size=16),
    "core": dict(tasks=4, task_seconds=0.2, array_mb=4),  # 4 tasks: still more than the 2 CPUs of the worker node
    # 02b's worker dies at step 20, 4 steps after its 2nd checkpoint (at 2 steps' distance the checkpoint was not yet
    # registered when the worker died, and the run resumed from the 1st), and the run resumes from step 16 to 24
    "beans": dict(train_steps=24, batch_size=8, eval_steps=8),
    "dogs": dict(train_steps=4, eval_steps=2, batch_size=8, shuffle_buffer=16, inference_batch_size=16),
    "cifar": dict(train_size=256, valid_size=128, epochs=1, batch_size=32, shuffle_buffer=64),
    "playbook": dict(
        rows=400,
        epochs=1,
        xgboost_rounds=5,
        tensorflow_epochs=5,
        stream_blocks_per_cpu=1,
        waiting_batches=4,
        waiting_runs=1,
    ),
    # as many requests in flight as at the course size (at 4 clients a replica, autoscaling took 80 s to add one), but
    # fewer of them; autoscaling as at the course size: out to 2 running replicas under load, back to 1 after it
    "serve": dict(load_requests=32),
    # ASHA over 2 trials of 2 epochs (one may stop at the grace period); 2 trials of 2 epochs over Ray Train, the second
    # interrupted and resumed; the batch sizes hold the cifar section's 32 (notebook 04's choice is among them)
    "tune": dict(
        train_size=128,
        valid_size=64,
        test_size=128,
        samples=2,
        epochs=2,
        train_samples=2,
        train_epochs=2,
        interrupt_after=1,
        batch_sizes=(16, 32),
    ),
}


def sources_kind(kind: str | None = None) -> str:
    """The chosen kind of sources: the argument, else ``$COURSE_SOURCES``, else ``standin`` (course.settings)."""
    return settings.read(SOURCES_ENV, kind)


def get_sources(kind: str | None = None, data_dir: Path | None = None, budget: Budget | None = None) -> Sources:
    """The sources for ``kind`` (see :func:`sources_kind`), with ``$COURSE_MODEL``'s model where it is set.

    The real sources' model follows ``budget`` (:data:`REAL_MODELS`; without one, :func:`budget_kind` with no GPUs)."""
    sources = _SOURCES[sources_kind(kind)](data_dir or data_folder(), budget.kind if budget else budget_kind())
    model = settings.read(MODEL_ENV)
    return replace(sources, model=model) if model else sources


def data_folder() -> Path:
    """:data:`DATA_DIR`, a folder: the stand-ins are read as files (a Hugging Face image folder, a saved model), so on
    a cluster they go on a shared mount. A bucket is the storage's place (``COURSE_STORAGE_PATH``), not the data's."""
    settings.read(DATA_DIR_ENV)  # a URI is refused, with the alternatives
    return DATA_DIR


def budget_kind(gpus: float = 0, kind: str | None = None) -> str:
    """The budget: the argument, else ``$COURSE_BUDGET``, else ``gpu`` when there are GPUs, ``cpu`` otherwise."""
    return settings.read(BUDGET_ENV, kind) or ("gpu" if gpus else "cpu")


# Whether a notebook's headline must reach its floor (course.results.record): `enforce` (default), or `report`
# for a run whose content cannot learn (the real-sources rehearsal's random weights): the figure and its floor are
# printed, and nothing is enforced.
FLOORS_ENV = "COURSE_FLOORS"


def floors() -> str:
    """``$COURSE_FLOORS``: ``enforce`` (default) or ``report``; anything else is an error that names both."""
    return settings.read(FLOORS_ENV)


def verbose() -> bool:
    """``COURSE_VERBOSE=1``: keep Ray's, Ray Train's and TensorFlow's info logs (off by default: the lesson's
    own output stays readable; true, yes and on work too, anything but a flag is refused)."""
    return settings.flag(VERBOSE_ENV)


def smoke(value: bool | None = None) -> bool:
    """The smoke size: the argument, else ``$COURSE_SMOKE`` (off by default)."""
    return settings.flag(SMOKE_ENV) if value is None else value


def get_budget(
    gpus: float = 0, kind: str | None = None, sources: str | None = None, smoke_size: bool | None = None
) -> Budget:
    """The budget for a cluster with ``gpus`` GPUs (see :func:`budget_kind`), for ``sources`` (see
    :func:`sources_kind`): with the real sources, its fine-tunes take the real model's steps and learning rates
    (:data:`REAL_KNOBS`). At the smoke size (``smoke_size``, else ``$COURSE_SMOKE``), every section then takes
    :data:`SMOKE_KNOBS`."""
    budget = _BUDGETS[budget_kind(gpus, kind)]
    if sources_kind(sources) == "real":
        budget = _with(budget, REAL_KNOBS[budget.kind])
    if smoke(smoke_size):
        budget = replace(_with(budget, SMOKE_KNOBS), size="smoke")
    return budget


def _with(budget: Budget, knobs: dict[str, dict]) -> Budget:
    """``budget`` with ``knobs``: for each section named, its fields changed (``"shared"``: the budget's own)."""
    sections = {name: replace(getattr(budget, name), **changes) for name, changes in knobs.items() if name in SECTIONS}
    return replace(budget, **knobs.get("shared", {}), **sections)


def is_local(uri: str) -> bool:
    """True for a local path, written as one (``/...``, ``./...``, ``../...``, ``~/...``); False for a Hub id
    (``beans``, ``ns/name``: whatever folders the working directory holds) or a remote URI such as ``s3://...``."""
    return "://" not in uri and uri.startswith(("/", ".", "~"))


def require_local(path: str | Path, what: str) -> Path:
    """Return ``path`` if it exists; otherwise fail with the command that builds it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"The {what} is missing at {path}. Build the course data and model with "
            f"`{BUILD_COMMAND}` in the repository root (about a minute, no network needed)."
        )
    return path


def require_data(sources: Sources, names: Iterable[str] | None = None) -> Sources:
    """``sources`` if what they name is there (``names``: only those fields, as a lesson's record lists them in
    ``course.lessons``; None: every one); otherwise an error that names the place and the fix.

    Stand-ins must be built (`make data`); folders on S3 must exist (a wrong bucket or prefix is named,
    with the setting that chose it). Hub ids are checked by the Hub when they are loaded.
    """
    fields_ = {name: uri for name, uri in asdict(sources).items() if name != "kind"}
    unknown = sorted(set(names or ()) - set(fields_))
    if unknown:
        raise ValueError(f"{unknown} are not sources: config.Sources has {sorted(fields_)}")
    for name, uri in fields_.items():
        if names is not None and name not in names:
            continue
        if sources.kind == "real" and name == "imagenette_labels":  # written on first use
            continue
        if "://" in uri:
            require_remote(uri, f"`{name}` of {SOURCES_ENV}={sources.kind}")
        elif is_local(uri) or sources.kind == "standin":
            require_local(uri, f"stand-in `{name}`")
    return sources


def require_remote(uri: str, what: str) -> str:
    """``uri`` if something is there; otherwise an error naming the URI, what it is for, and how to change it."""
    fix = f"check the bucket and prefix, or change {SOURCES_ENV} (or the URI in course/config.py)"
    try:
        found = exists(uri)
    except OSError as error:  # no such bucket, no network, no permission
        raise FileNotFoundError(f"Cannot read {uri} ({what}): {error}. {fix[0].upper() + fix[1:]}.") from None
    if not found:
        raise FileNotFoundError(f"Nothing at {uri} ({what}): {fix}.")
    return uri


def storage_path() -> str:
    """Where Ray's workers write: Ray Train's checkpoints and results, and files a Ray Data job writes.
    ``$COURSE_STORAGE_PATH``, else ``results/ray``.

    One machine can use a local folder; a multi-node cluster needs storage that every node
    reaches, such as an NFS mount (``/mnt/cluster_storage``) or a bucket (``s3://bucket/prefix``).
    """
    storage = settings.read(STORAGE_ENV) or str(RESULTS_DIR / "ray")
    return storage if "://" in storage else str(Path(storage).absolute())


def shared_path(name: str, storage: str | None = None) -> str:
    """``name`` under ``storage`` (default :func:`storage_path`): a place every worker can write to and this process
    can read from."""
    return f"{(storage or storage_path()).rstrip('/')}/{name}"


# Notebook 06's service: where it listens (unset: a free port on 127.0.0.1, chosen at run time), and the largest
# request it takes (the model sees 224 x 224 pixels at most: a photo from a phone is far more than it needs).
SERVE_PORT_ENV = "COURSE_SERVE_PORT"
MAX_IMAGE_BYTES = 5_000_000
MAX_IMAGE_PIXELS = 4096 * 4096


# Checkpoints kept per Ray Train run; older ones are deleted (the real ViT's are about 1 GB each). Ray Train's
# `result.metrics_dataframe` lists the reports of kept checkpoints only: 6 keeps every evaluation of the course's runs.
CHECKPOINTS_KEPT = 6


def run_name(name: str, now: datetime | None = None) -> str:
    """A Ray Train run name of its own for every run, ``<name>-<date>_<time>``.

    Runs with the same name and storage would share one folder: a rerun would find the last run's
    checkpoints, and ``result.metrics_dataframe`` would hold both runs' rows.
    """
    return f"{name}-{(now or datetime.now()).strftime('%Y-%m-%d_%H-%M-%S')}"


def publish_folder(folder: Path, uri: str) -> str:
    """Copy the local ``folder`` to ``uri`` (a path every node mounts, or ``s3://...``): return ``uri``."""
    fs, path = filesystem(uri)
    fs.create_dir(path, recursive=True)
    pafs.copy_files(str(folder), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    return uri


def exists(uri: str) -> bool:
    """True when something is at ``uri`` (a local path or ``s3://...``)."""
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def remove(uri: str) -> None:
    """Delete the folder at ``uri`` (a local path or ``s3://...``) if there is one."""
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and path for a local path (relative ones too) or a URI such as ``s3://...``."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), str(Path(uri).resolve())
    path = uri.removeprefix(ANONYMOUS_S3)
    region = PUBLIC_BUCKET_REGIONS.get(path.split("/", 1)[0])
    if uri.startswith(ANONYMOUS_S3) and region:  # a public bucket of the course: its region, without a look-up
        # (an S3-compatible server, a mirror or a test server, comes from AWS_ENDPOINT_URL, as from_uri reads it)
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        return pafs.S3FileSystem(anonymous=True, region=region, endpoint_override=endpoint), path
    return pafs.FileSystem.from_uri(uri)  # anonymous@ too; from_uri looks the bucket's region up
