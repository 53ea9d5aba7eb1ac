"""Lesson 06's checks (course.exercises.ray_serve): the common wrong answers are refused with a message that
teaches, other right answers pass.

The wrong answers a learner who half understands writes, each a case below:

06.1 `BatchedScorer` (requests of one number each, grouped up to 16 into one call of `score`):
  - not a deployment (`@serve.deployment` left out), or a function; `max_ongoing_requests` left at Serve's 5, or set
    below the batch (8): a batch of 16 never fills;
  - `@serve.batch` left at its default `max_batch_size` (10), or another size (32), on any method;
  - no `@serve.batch` (`score` of one value per request); `score` called value by value inside the batch; `score`
    called on the whole batch once for each of its requests (right numbers, a batch's work done n times: before
    this case was found the check gave it a ✓);
  - the answers in another order; `score` bypassed by a formula of its own; one answer for the whole batch (not a
    list: Serve refuses it); a method that never returns; `score` awaited (it is a plain function);
  - Serve not started (the notebook's last cell stopped it): a right answer is still accepted, the check starts
    Serve and stops it again.
06.2 `scaling_options(resources)` (the options of the lesson's `Model`: it scales with the load on every cluster,
one replica kept ready, one whole GPU per replica where there are GPUs, never more replicas than GPUs):
  - a fixed `num_replicas` (everywhere, or one per GPU on GPU clusters); no `autoscaling_config`; both (Serve
    refuses); min above max; keys of its own;
    `min_replicas=0` (scale to zero), on every cluster or only on GPU clusters (to save GPUs);
  - a GPU asked for on a cluster without GPUs; a GPU only where the key "GPU" is there (0.0 counts as none);
    half a GPU per replica (the lesson's `model_gpus` on one GPU); the machine's resources read instead of the
    argument (`ray.cluster_resources()`, the notebook's `plan`);
  - `max_replicas` above the GPUs (4 on 3), or a number that fits the check's 3 GPUs only; autoscaling on CPU
    clusters only, a fixed count on GPU ones;
  - one replica per GPU kept all the time (`min_replicas` = the GPUs: nothing scales). Before issue 43 the check
    gave this a ✓;
  - a `target_ongoing_requests` above what a replica takes (`max_ongoing_requests`): Serve never adds a replica.
  - `resources["GPU"]` read on a cluster without GPUs (KeyError); a value Serve refuses (the field is named).
"""

from __future__ import annotations

import pytest
from exercise_checks import expect, leave_ray, todo
from ray import serve

from course.exercises import (
    checking,
    ray_serve,
)

# --- 06.2: needs no cluster (Serve checks the options as it would for a deployment) ---------------------------------


def always(options):
    return lambda resources: options


def gpus_of(resources):
    return int(resources.get("GPU", 0))


def right(resources):
    gpus = gpus_of(resources)
    scaling = {"min_replicas": 1, "max_replicas": min(4, gpus) if gpus else 4}
    return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if gpus else 0}}


def changed(**scaling_on_gpus):
    """`right`, with the autoscaling_config's entries changed on clusters with GPUs (a value: a function of them)."""

    def answer(resources):
        options, gpus = right(resources), gpus_of(resources)
        if gpus:
            options["autoscaling_config"] |= {k: v(gpus) for k, v in scaling_on_gpus.items()}
        return options

    return answer


def more_replicas_than_gpus(resources):
    scaling = {"min_replicas": 1, "max_replicas": 4}
    return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if resources.get("GPU") else 0}}


def gpu_key_present(resources):
    top = min(4, int(resources.get("GPU", 4)))
    scaling = {"min_replicas": 1, "max_replicas": max(top, 2)}
    return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if "GPU" in resources else 0}}


def never_scales(resources):  # a target no replica's load reaches: it takes 32 requests at a time
    options = right(resources)
    options["autoscaling_config"]["target_ongoing_requests"] = 1000
    return options


def three_at_most(resources):  # right on the check's 3-GPU cluster only
    scaling = {"min_replicas": 1, "max_replicas": 3}
    return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if gpus_of(resources) else 0}}


def autoscaling_on_cpus_only(resources):
    gpus = gpus_of(resources)
    if gpus and gpus < 3:
        return {"num_replicas": gpus, "ray_actor_options": {"num_gpus": 1}}
    return right(resources)


def half_a_gpu(resources):  # the lesson's `model_gpus` on a cluster with one GPU: half of it
    options = right(resources)
    options["ray_actor_options"]["num_gpus"] = 0.5 if gpus_of(resources) else 0
    return options


def fixed_on_gpus(resources):  # autoscaling on CPUs; on GPUs one replica per GPU, always
    gpus = gpus_of(resources)
    return {"num_replicas": gpus, "ray_actor_options": {"num_gpus": 1}} if gpus else right(resources)


def this_machines_gpus(resources):  # the argument ignored: this machine (no GPU) decides
    import ray

    return right(ray.cluster_resources() if ray.is_initialized() else {"CPU": 2.0})


SCALING_WRONG = {
    "a fixed num_replicas": (always({"num_replicas": 2}), ["does not follow the load"]),
    "no autoscaling_config": (always({"ray_actor_options": {"num_gpus": 0}}), ["no `autoscaling_config`"]),
    "num_replicas and autoscaling": (
        always({"num_replicas": 2, "autoscaling_config": {"min_replicas": 1, "max_replicas": 2}}),
        ["Serve refuses", "num_replicas is not allowed"],
    ),
    "min above max": (always({"autoscaling_config": {"min_replicas": 3, "max_replicas": 2}}), ["Serve refuses"]),
    "keys of its own": (always({"min": 1, "max": 4}), ["Serve refuses"]),
    "scale to zero": (
        always({"autoscaling_config": {"min_replicas": 0, "max_replicas": 4}}),
        ["min_replicas=0", "Keep at least one"],
    ),
    "scale to zero on GPU clusters": (changed(min_replicas=lambda g: 0), ["min_replicas=0 on a cluster with 3"]),
    "a GPU everywhere": (
        always({"autoscaling_config": {"min_replicas": 1, "max_replicas": 4}, "ray_actor_options": {"num_gpus": 1}}),
        ["waits forever"],
    ),
    "a GPU where the key is": (gpu_key_present, ["GPU: 0.0", "how many GPUs"]),
    "half a GPU each": (half_a_gpu, ["should get one", "asks for 0.5"]),
    "this machine's resources": (this_machines_gpus, ["should get one", "the `resources` your function is given"]),
    "more replicas than GPUs": (more_replicas_than_gpus, ["max_replicas=4 on a cluster with 3"]),
    "3 written in": (three_at_most, ["max_replicas=3 on a cluster with 2 GPU(s)", "not a number written in"]),
    "autoscaling on CPU clusters only": (autoscaling_on_cpus_only, ["no `autoscaling_config` on a"]),
    "a fixed num_replicas on GPU clusters": (
        fixed_on_gpus,
        ["no `autoscaling_config` on a cluster with 3 GPU(s) (a fixed `num_replicas=3`)", "up to one replica per GPU"],
    ),
    "one replica per GPU, always": (
        changed(min_replicas=lambda g: g, max_replicas=lambda g: g),
        ["min_replicas=3 and max_replicas=3 on a cluster with 3 GPUs", "nothing can scale", "Keep one replica ready"],
    ),
    "a target never reached": (never_scales, ["target_ongoing_requests=1000", "never adds"]),
    "a target never reached on GPU clusters": (
        changed(target_ongoing_requests=lambda g: 64),
        ["target_ongoing_requests=64 on a cluster with 3 GPU(s)", "never adds"],
    ),
    "nothing returned": (lambda resources: None, ["return the dict for `.options`"]),
    "resources['GPU'] on a cluster without GPUs": (
        lambda resources: right({"GPU": resources["GPU"]}),
        ["KeyError: 'GPU'", 'no "GPU" key on a cluster without GPUs', 'resources.get("GPU", 0)'],
    ),
    "a value Serve refuses": (
        always({"autoscaling_config": {"min_replicas": "one", "max_replicas": 4}}),
        ["Serve refuses", "`autoscaling_config.min_replicas`: Input should be a valid integer", "'one'"],
    ),
    "a negative num_replicas": (always({"num_replicas": -1}), ["`num_replicas`: Input should be greater than"]),
    "one replica per GPU where the key is, none when it is 0.0": (
        lambda resources: (
            {
                "autoscaling_config": {"min_replicas": 1, "max_replicas": int(resources["GPU"])},
                "ray_actor_options": {"num_gpus": 1},
            }
            if "GPU" in resources
            else right(resources)
        ),
        ["Serve refuses these options for the resources", "'GPU': 0.0", "max_replicas"],
    ),
}


@pytest.mark.parametrize("answer, phrases", SCALING_WRONG.values(), ids=SCALING_WRONG.keys())
def test_the_autoscaling_check_refuses(answer, phrases):
    expect(ray_serve.check_autoscaling(answer), checking.WRONG, *phrases)


def a_target_of_its_own(resources):  # below the 32 requests the lesson's Model takes at a time
    options = right(resources)
    options["autoscaling_config"]["target_ongoing_requests"] = 8
    return options


def every_gpu(resources):  # as many replicas as GPUs at most, "auto" for the count
    gpus = gpus_of(resources)
    scaling = {"min_replicas": 1, "max_replicas": gpus or 3, "target_ongoing_requests": 4}
    return {"num_replicas": "auto", "autoscaling_config": scaling, "ray_actor_options": {"num_gpus": min(gpus, 1)}}


def as_gpus_float(resources):  # resources' values are floats: kept as they are
    gpus = resources.get("GPU", 0.0)
    scaling = {"min_replicas": 1, "max_replicas": int(min(4, gpus)) if gpus else 4}
    return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1.0 if gpus else 0.0}}


def the_lessons_settings(resources):  # the lesson's cell 8 values, for the cluster given
    from course.budget import get_budget
    from course.resources import cluster_gpus

    budget = get_budget(cluster_gpus(resources)).serve
    scaling = {
        "min_replicas": 1,
        "max_replicas": min(budget.max_replicas, cluster_gpus(resources) or budget.max_replicas),
        "target_ongoing_requests": budget.target_ongoing_requests,
        "upscale_delay_s": budget.upscale_delay_s,
    }
    return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if cluster_gpus(resources) else 0}}


SCALING_RIGHT = {
    "right": right,
    "a target of its own": a_target_of_its_own,
    "num_replicas auto": every_gpu,
    "floats": as_gpus_float,
    "the lesson's settings": the_lessons_settings,
}


@pytest.mark.parametrize("answer", SCALING_RIGHT.values(), ids=SCALING_RIGHT.keys())
def test_the_autoscaling_check_accepts(answer):
    expect(ray_serve.check_autoscaling(answer), checking.DONE, "scales with the load")


def test_the_autoscaling_check_not_done():
    expect(ray_serve.check_autoscaling(todo), checking.NOT_DONE)


# --- 06.1: what is refused before anything is deployed ---------------------------------------------------------------


class NotADeployment:
    def __init__(self, score):
        self.score = score


@serve.deployment(max_ongoing_requests=8)
class EightAtATime:
    def __init__(self, score):
        self.score = score

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def __call__(self, values):
        return self.score(values)


@serve.deployment  # max_ongoing_requests left at 5
class FiveAtATime:
    def __init__(self, score):
        self.score = score

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def __call__(self, values):
        return self.score(values)


@serve.deployment(max_ongoing_requests=32)
class DefaultBatch:
    def __init__(self, score):
        self.score = score

    @serve.batch
    async def __call__(self, values):
        return self.score(values)


@serve.deployment(max_ongoing_requests=64)
class ThirtyTwo:
    def __init__(self, score):
        self.score = score

    async def __call__(self, value):
        return await self.handle(value)

    @serve.batch(max_batch_size=32)
    async def handle(self, values):  # the batched method need not be __call__
        return self.score(values)


@serve.deployment  # neither batched nor room for a batch
class OneAtATime:
    def __init__(self, score):
        self.score = score

    async def __call__(self, value):
        return self.score([value])[0]


BATCHING_REFUSED_AT_ONCE = {
    "no @serve.batch, max_ongoing_requests left at 5": (
        OneAtATime,
        ["no method of `OneAtATime` has `@serve.batch`", "max_ongoing_requests=5", "a list of values"],
    ),
    "not a deployment": (
        NotADeployment,
        ["`NotADeployment` is a plain class, not a Serve deployment", "@serve.deployment"],
    ),
    "a function": (todo, ["is a function, not a Serve deployment"]),
    "max_ongoing_requests below the batch": (EightAtATime, ["max_ongoing_requests=8", "at least 16"]),
    "max_ongoing_requests left at 5": (FiveAtATime, ["max_ongoing_requests=5", "never fills"]),
    "@serve.batch's default size": (
        DefaultBatch,
        ["max_batch_size=10", "default, left in place", "max_batch_size=16)"],
    ),
    "another batch size": (ThirtyTwo, ["`handle` groups up to max_batch_size=32", "16"]),
}


@pytest.mark.parametrize("answer, phrases", BATCHING_REFUSED_AT_ONCE.values(), ids=BATCHING_REFUSED_AT_ONCE.keys())
def test_the_batching_check_refuses_before_deploying(answer, phrases):
    import ray

    started = ray.is_initialized()
    expect(ray_serve.check_batching(answer), checking.WRONG, *phrases)
    assert ray.is_initialized() == started, "the check started Ray for an answer it refuses without it"


@pytest.mark.cluster  # a deployment of the right shape: the check attaches Ray before calling it
def test_a_scorer_whose_init_loops_for_ever_is_stopped_at_the_checks_limit(monkeypatch, tmp_path):
    """06.1 makes the class once here before deploying it: a loop that never ends in its `__init__` is stopped after
    FIRST_CALL_LIMIT_S (not the whole check's 5 minutes), named, and not left spinning in the kernel. (The class must
    pickle, as Serve sends it to Ray: the loop marks a file.)"""
    import time
    from pathlib import Path

    monkeypatch.setattr(ray_serve, "FIRST_CALL_LIMIT_S", 1)
    stopped = str(tmp_path / "stopped")

    @serve.deployment(max_ongoing_requests=16)
    class Spins:
        def __init__(self, score):
            self.score = score
            try:
                while True:
                    pass
            finally:
                Path(stopped).touch()

        @serve.batch(max_batch_size=16)
        async def __call__(self, values):
            return self.score(values)

    expect(ray_serve.check_batching(Spins), checking.WRONG, "had not returned after 1 s", "`__init__`", "stopped it")
    deadline = time.monotonic() + 60
    while not Path(stopped).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert Path(stopped).exists(), "the learner's loop still runs after its verdict"


def test_the_batched_methods_are_found_on_any_name():
    assert ray_serve.batched_methods(ThirtyTwo.func_or_class) == {"handle": 32}
    assert ray_serve.batched_methods(NotADeployment) == {}


# --- 06.1 on Serve (on the test cluster, or a local Ray), Serve listening on a free loopback port -----------------


@serve.deployment(max_ongoing_requests=32)
class Right:
    def __init__(self, score):
        self.score = score

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def __call__(self, values):
        return self.score(values)


@serve.deployment
class Untouched:
    def __init__(self, score):
        self.score = score

    async def __call__(self, value):
        raise NotImplementedError


@serve.deployment(max_ongoing_requests=32)
class OneAtATime:  # no @serve.batch: score sees one value per call
    def __init__(self, score):
        self.score = score

    async def __call__(self, value):
        return self.score([value])[0]


@serve.deployment(max_ongoing_requests=32)
class ValueByValue:  # batched, but score called once per value of the batch
    def __init__(self, score):
        self.score = score

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def __call__(self, values):
        return [self.score([value])[0] for value in values]


@serve.deployment(max_ongoing_requests=32)
class WholeBatchPerRequest:  # batched, but the whole batch scored once for each of its requests: right numbers
    def __init__(self, score):
        self.score = score

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def __call__(self, values):
        return [self.score(values)[i] for i in range(len(values))]


@serve.deployment(max_ongoing_requests=32)
class Reversed:
    def __init__(self, score):
        self.score = score

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def __call__(self, values):
        return self.score(values)[::-1]


@serve.deployment(max_ongoing_requests=32)
class AwaitsScore:  # the method is async, so `score` is awaited too (walk of c476c86): it is a plain function
    def __init__(self, score):
        self.score = score

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def __call__(self, values):
        return await self.score(values)


@serve.deployment(max_ongoing_requests=32)
class OwnFormula:  # right numbers, but `score` bypassed
    def __init__(self, score):
        self.score = score

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def __call__(self, values):
        return [2 * value + 1 for value in values]


@serve.deployment(max_ongoing_requests=32)
class NotAList:  # batched, but one answer returned for the whole batch
    def __init__(self, score):
        self.score = score

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def __call__(self, values):
        return self.score(values)[0]


@serve.deployment(max_ongoing_requests=32)
class NeverReturns:
    def __init__(self, score):
        self.score = score

    async def __call__(self, value):
        import asyncio

        await asyncio.sleep(10**6)


@serve.deployment(max_ongoing_requests=32)
class BatchedHelper:  # another right answer: the batched method is not __call__
    def __init__(self, score):
        self.score = score

    async def __call__(self, value):
        return await self.scored(value)

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
    async def scored(self, values):
        return self.score(values)


@pytest.mark.cluster
def test_the_batching_check_starts_serve_when_it_is_not_running(monkeypatch):
    """After Run All the notebook's last cell has stopped Serve: a right answer is still accepted. The check starts
    Serve as the lesson's cell does (on 127.0.0.1 only), and stops it again: its port stops listening."""
    from course import serving
    from course.cluster import init_ray
    from course.distributed import free_loopback_port

    init_ray()
    if ray_serve._serve_is_running():
        serve.shutdown()
    port = free_loopback_port()
    monkeypatch.setattr(serving, "serve_port", lambda: port)
    expect(ray_serve.check_batching(Untouched), checking.NOT_DONE)  # starts nothing
    assert not ray_serve._serve_is_running()
    expect(ray_serve.check_batching(Right), checking.DONE, "batches of up to")
    assert not ray_serve._serve_is_running(), "the check leaves running the Serve it started"
    assert not serving.is_listening(port), f"port {port} still answers after the check"


@pytest.fixture(scope="module")
def serve_here():

    from course.cluster import init_ray
    from course.distributed import free_loopback_port
    from course.serving import PATIENT_CONTROLLER, serve_logging

    init_ray()
    serve.start(
        http_options={"host": "127.0.0.1", "port": free_loopback_port()},
        logging_config=serve_logging(),
        controller_options=PATIENT_CONTROLLER,
    )
    yield
    serve.shutdown()
    leave_ray()


BATCHING_WRONG = {
    "no @serve.batch": (OneAtATime, ["were not grouped", "@serve.batch"]),
    "score value by value": (ValueByValue, ["reached `__call__` grouped", "once with the whole list"]),
    "one answer for the batch": (
        NotAList,
        ["must return a list of the same length, one answer per request", "doesn't preserve batch size"],
    ),
    "whole batch scored per request": (WholeBatchPerRequest, ["once per batch"]),
    "answers reversed": (Reversed, ["the answer for another value"]),
    "a formula of its own": (OwnFormula, ["call `self.score`"]),
    "score awaited": (AwaitsScore, ["can't be used in 'await' expression", "call it without `await`"]),
}


@pytest.mark.cluster
@pytest.mark.parametrize("answer, phrases", BATCHING_WRONG.values(), ids=BATCHING_WRONG.keys())
def test_the_batching_check_refuses(serve_here, answer, phrases):
    expect(ray_serve.check_batching(answer), checking.WRONG, *phrases)
    assert ray_serve.EXERCISE_APP not in serve.status().applications, "the check leaves its application deployed"


@pytest.mark.cluster
def test_the_batching_check_says_when_no_answer_comes(serve_here, monkeypatch):
    monkeypatch.setattr(ray_serve, "ANSWER_WAIT_S", 5)  # the check's own wait, short here
    expect(
        ray_serve.check_batching(NeverReturns),
        checking.WRONG,
        "no answer within 5 s",
        "does your method return?",
        "an `await` that never ends",
    )
    assert ray_serve.EXERCISE_APP not in serve.status().applications, "the check leaves its application deployed"


@pytest.mark.cluster
@pytest.mark.parametrize("answer", [Right, BatchedHelper], ids=lambda d: d.name)
def test_the_batching_check_accepts(serve_here, answer):
    expect(ray_serve.check_batching(answer), checking.DONE, "batches of up to")
    assert ray_serve.EXERCISE_APP not in serve.status().applications, "the check leaves its application deployed"
