"""The budget: how much work each lesson does, and with how many workers (``COURSE_BUDGET``, ``COURSE_SMOKE``).

``cpu`` is a laptop's budget (minutes per notebook on 2 cores), ``gpu`` a GPU cluster's; unset, it follows the hardware:
``gpu`` when the cluster reports GPUs (:func:`course.config.budget_kind`). One section per lesson (a frozen dataclass,
``budget.beans.train_steps``); the real sources change a few knobs for the real model (:data:`REAL_KNOBS`), and
``COURSE_SMOKE=1`` takes either budget down to the smoke size (:data:`SMOKE_KNOBS`): the same code paths, at their
smallest, in minutes. Every budget checks its own rules when it is made (:class:`Checked`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from course import settings
from course.budget_sections import (
    BeansBudget,
    CifarBudget,
    CoreBudget,
    DebugBudget,
    DogsBudget,
    FsdpBudget,
    PlaybookBudget,
    ServeBudget,
    TuneBudget,
)
from course.checked import Checked
from course.config import BUDGET_ENV, budget_kind, smoke, sources_kind

SIZES = ("course", "smoke")  # Budget.size: the lessons' own size, or the smoke size (COURSE_SMOKE=1)


SECTIONS = {
    "core": CoreBudget,
    "beans": BeansBudget,
    "debug": DebugBudget,
    "dogs": DogsBudget,
    "cifar": CifarBudget,
    "fsdp": FsdpBudget,
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
    debug: DebugBudget
    dogs: DogsBudget
    cifar: CifarBudget
    fsdp: FsdpBudget
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


_CPU = Budget(
    kind="cpu",
    size="course",
    max_workers=2,
    max_actors=2,
    eval_batch_size=64,
    core=CoreBudget(tasks=8, task_seconds=0.5, array_mb=40),
    beans=BeansBudget(train_steps=300, batch_size=32, eval_steps=50, learning_rate=1e-3, local_steps=10),
    debug=DebugBudget(
        workers=2,
        train_size=2000,
        valid_size=500,
        epochs=3,
        batch_size=64,
        learning_rate=1e-3,
        warn_interval_s=7,
        timeout_s=12,
        checkpoint_every=5,
        steps_per_phase=20,
        resize_interval_s=2.0,
        start_timeout_s=6,
        phase_limit_s=180,
    ),
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
    # about 2.1 M parameters: 34 MB of weights, gradients and AdamW state per DDP worker; a minute's training on 2 cores
    fsdp=FsdpBudget(
        num_layers=4,
        num_heads=8,
        hidden_dim=256,
        mlp_dim=512,
        train_size=1200,
        valid_size=500,
        epochs=3,
        batch_size=64,
        learning_rate=1e-3,
        compare_steps=5,
        resume_steps=5,
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
        # notebook 04's choice and step 3's best, one at a time: the first runs to its end, the second is interrupted
        # at its first report (step 4) and resumed (step 5) with at least 1 of its 3 epochs left
        train_samples=2,
        train_epochs=3,
        interrupt_after=1,
        workers=2,
        train_trials_at_once=1,  # two at once (about 2 GB each) took the cluster past a laptop's 8 GB
        batch_sizes=(32, 64, 128),
    ),
)
# Each budget is sized for the stand-ins; with the real sources it changes as below, for the real model
# (course.sources.REAL_MODELS).
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
        # ViT-B's shape (12 blocks, width 768, MLP 3072, 12 heads: about 85 M parameters, 1.4 GB of state per DDP
        # worker) on 32 px images in patches of 4, over NCCL on every GPU of the plan (up to max_workers)
        fsdp=replace(
            _CPU.fsdp,
            num_layers=12,
            num_heads=12,
            hidden_dim=768,
            mlp_dim=3072,
            train_size=20_000,
            valid_size=2000,
            epochs=3,
            batch_size=256,
            learning_rate=3e-4,
            compare_steps=20,
            resume_steps=20,
        ),
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
# entry, a new lesson's too (tests/unit/test_budget.py says which is missing).
SMOKE_KNOBS: dict[str, dict] = {
    "shared": dict(eval_batch_size=16),
    "core": dict(tasks=4, task_seconds=0.2, array_mb=4),  # 4 tasks: still more than the 2 CPUs of the worker node
    # 02b's worker dies at step 20, 4 steps after its 2nd checkpoint (at 2 steps' distance the checkpoint was not yet
    # registered when the worker died, and the run resumed from the 1st), and the run resumes from step 16 to 24
    "beans": dict(train_steps=24, batch_size=8, eval_steps=8, local_steps=2),
    # the same hang, cut short sooner, and the same resizes (each world size still reports a checkpoint), on fewer
    # images and steps
    "debug": dict(
        train_size=256, valid_size=128, epochs=1, warn_interval_s=3, timeout_s=6, steps_per_phase=4, checkpoint_every=2
    ),
    "dogs": dict(train_steps=4, eval_steps=2, batch_size=8, shuffle_buffer=16, inference_batch_size=16),
    "cifar": dict(train_size=256, valid_size=128, epochs=1, batch_size=32, shuffle_buffer=64),
    # the same runs (DDP, FSDP2 with its checkpoint, the resume on 1 worker, the load here) and the same ViT (the gpu
    # budget's is ViT-B's shape: `make gpu-check` trains it with NCCL), on a few steps
    "fsdp": dict(train_size=128, valid_size=64, epochs=1, batch_size=32, compare_steps=2, resume_steps=1),
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
    # ASHA over 2 trials of 2 epochs (one may stop at the grace period); over Ray Train 2 trials of 3 epochs on either
    # budget, the second interrupted and resumed; the batch sizes hold the cifar section's 32 (04's choice)
    "tune": dict(
        train_size=128,
        valid_size=64,
        test_size=128,
        samples=2,
        epochs=2,
        train_samples=2,
        train_epochs=3,
        batch_sizes=(16, 32),
    ),
}


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
