"""The sections of the budget (``course.budget``): one frozen dataclass of knobs per lesson
(``budget.beans.train_steps``), each checking its own rules when it is made (:class:`course.checked.Checked`);
``course.budget.SECTIONS`` names them."""

from __future__ import annotations

from dataclasses import dataclass

from course.checked import Checked

ARCHITECTURES = ("small", "full")  # notebook 04's ViT (helpers.vit)


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
    local_steps: int  # notebook 02's first try in Ray Train's local mode: this many steps, then one evaluation

    def rules(self) -> list[tuple[str, bool, str]]:
        return [
            ("eval_steps", self.eval_steps <= self.train_steps, "must be at most train_steps"),
            ("local_steps", 1 <= self.local_steps <= self.train_steps, "must be from 1 to train_steps"),
        ]


@dataclass(frozen=True)
class DebugBudget(Checked):
    """Lesson 02c: a failure read, a hang found and cut short, a node that leaves (a small CNN on CIFAR-10)."""

    workers: int  # Ray Train workers of each run, on CPUs: 2, the fewest that can wait for each other
    train_size: int  # images of the train split every run of the lesson trains on, split between the workers
    valid_size: int  # images of the test split the fixed run (section 5) validates on
    epochs: int  # of the fixed run
    batch_size: int  # global: split between the workers, whatever their number
    learning_rate: float
    warn_interval_s: int  # RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S: a warning names the missing ranks this often
    timeout_s: int  # RAY_TRAIN_COLLECTIVE_TIMEOUT_S: a wait in a collective becomes an error after this long
    checkpoint_every: int  # section 6: rank 0 attaches a checkpoint every this many steps
    steps_per_phase: int  # section 6: steps trained at each world size (2, then 1, then 2) before the cell moves on
    resize_interval_s: float  # section 6: how often Ray Train looks for room for more workers (ScalingConfig)
    start_timeout_s: int  # section 6: RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S, a restart's wait for its placement group
    phase_limit_s: int  # section 6: the longest a cell waits for its steps at one world size, then it ends the run

    def rules(self) -> list[tuple[str, bool, str]]:
        before = "must be above warn_interval_s: a warning first"
        each = "must be above checkpoint_every: each world size reports a checkpoint"
        return [("timeout_s", self.timeout_s > self.warn_interval_s, before)] + [
            ("steps_per_phase", self.steps_per_phase > self.checkpoint_every, each)
        ]


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
class FsdpBudget(Checked):
    """Lesson 04b: notebook 04's ViT, wider and deeper, trained with DDP then FSDP2 on the plan's workers."""

    num_layers: int  # transformer blocks: each one a unit that FSDP2 gathers, and frees, on its own
    num_heads: int
    hidden_dim: int
    mlp_dim: int
    train_size: int  # images of the train split the FSDP2 run trains on, split between the workers
    valid_size: int  # images of the test split every run validates on
    epochs: int  # of the FSDP2 run
    batch_size: int  # global: split between the workers
    learning_rate: float
    compare_steps: int  # steps of the DDP run; both runs' losses are compared after this many steps
    resume_steps: int  # steps the run trains on after it resumes from the checkpoint on 1 worker

    def rules(self) -> list[tuple[str, bool, str]]:
        steps = self.epochs * (self.train_size // self.batch_size)
        return [
            ("hidden_dim", self.hidden_dim % self.num_heads == 0, "must be a multiple of num_heads"),
            ("compare_steps", self.compare_steps <= steps, "must be at most the FSDP2 run's steps"),
        ]


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
    train_samples: int  # trials over Ray Train, each fitting a TorchTrainer: 04's choice, step 3's best, draws
    train_epochs: int  # epochs of each of those trials
    interrupt_after: int  # trials that end before step 4's Ctrl-C (`InterruptOnce`); the ones running then stop
    workers: int  # Ray Train workers per trial (up to the cluster's GPUs where it has GPUs)
    train_trials_at_once: int | None  # at most, for memory: 4 processes with torch per trial (None: as resources allow)
    batch_sizes: tuple[int, ...]  # the batch sizes both searches choose from; notebook 04's batch is one of them

    def rules(self) -> list[tuple[str, bool, str]]:
        return [
            ("samples", self.samples >= 2, "must be at least 2: a search compares trials"),
            ("train_samples", self.train_samples >= 2, "must be at least 2: notebook 04's choice, then step 3's best"),
            (
                "train_epochs",
                self.train_epochs >= 3,
                "must be at least 3: the trial interrupted in its first epochs keeps one to train after the restore",
            ),
            (
                "interrupt_after",
                1 <= self.interrupt_after < self.train_samples,
                "must be at least 1 and less than train_samples: a trial must still run when the Ctrl-C comes",
            ),
        ]
