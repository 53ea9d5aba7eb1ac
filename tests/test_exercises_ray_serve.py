"""Lesson 06's checks (helpers.exercises.ray_serve): the common wrong answers are refused with a message that
teaches, the right one passes."""

from __future__ import annotations

import pytest
from exercise_checks import expect, results_here, todo  # noqa: F401  (results_here: an autouse fixture)

from helpers.exercises import (
    checking,
    ray_serve,
)


def test_the_autoscaling_check():
    """06.2 needs no cluster: Serve checks the options as it would for a deployment."""

    def always(options):
        return lambda resources: options

    fixed = {"num_replicas": 2}
    expect(ray_serve.check_autoscaling(always(fixed)), checking.WRONG, "does not follow the load")
    no_scaling = {"ray_actor_options": {"num_gpus": 0}}
    expect(ray_serve.check_autoscaling(always(no_scaling)), checking.WRONG, "no `autoscaling_config`")
    refused = {"num_replicas": 2, "autoscaling_config": {"min_replicas": 1, "max_replicas": 2}}
    expect(ray_serve.check_autoscaling(always(refused)), checking.WRONG, "Serve refuses", "num_replicas is not allowed")
    bad_bounds = {"autoscaling_config": {"min_replicas": 3, "max_replicas": 2}}
    expect(ray_serve.check_autoscaling(always(bad_bounds)), checking.WRONG, "Serve refuses these options")
    to_zero = {"autoscaling_config": {"min_replicas": 0, "max_replicas": 4}}
    expect(ray_serve.check_autoscaling(always(to_zero)), checking.WRONG, "min_replicas=0", "Keep at least one")
    gpu_always = {"autoscaling_config": {"min_replicas": 1, "max_replicas": 4}, "ray_actor_options": {"num_gpus": 1}}
    expect(ray_serve.check_autoscaling(always(gpu_always)), checking.WRONG, "waits forever")
    expect(ray_serve.check_autoscaling(lambda r: {"min": 1, "max": 4}), checking.WRONG, "Serve refuses")

    def more_replicas_than_gpus(resources):
        scaling = {"min_replicas": 1, "max_replicas": 4}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if resources.get("GPU") else 0}}

    expect(ray_serve.check_autoscaling(more_replicas_than_gpus), checking.WRONG, "max_replicas=4 on a cluster with 3")

    def gpu_key_present(resources):
        top = min(4, int(resources.get("GPU", 4)))
        scaling = {"min_replicas": 1, "max_replicas": max(top, 2)}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if "GPU" in resources else 0}}

    expect(ray_serve.check_autoscaling(gpu_key_present), checking.WRONG, "GPU: 0.0")

    def never_scales(resources):  # a target no replica's load reaches: it takes 5 requests at a time
        gpus = int(resources.get("GPU", 0))
        scaling = {"min_replicas": 1, "max_replicas": min(4, gpus) if gpus else 4, "target_ongoing_requests": 1000}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if gpus else 0}}

    expect(ray_serve.check_autoscaling(never_scales), checking.WRONG, "target_ongoing_requests=1000", "never adds")

    def right(resources):
        gpus = int(resources.get("GPU", 0))
        scaling = {"min_replicas": 1, "max_replicas": min(4, gpus) if gpus else 4}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if gpus else 0}}

    expect(ray_serve.check_autoscaling(right), checking.DONE)

    def a_target_of_its_own(resources):  # below the 32 requests the lesson's Model takes at a time
        options = right(resources)
        options["autoscaling_config"]["target_ongoing_requests"] = 8
        return options

    expect(ray_serve.check_autoscaling(a_target_of_its_own), checking.DONE)
    expect(ray_serve.check_autoscaling(todo), checking.NOT_DONE)


def test_the_batching_check_refuses_a_replica_that_takes_fewer_requests_than_a_batch():
    """06.1: with `max_ongoing_requests=8` batches of 16 never fill; said before anything is deployed."""
    from ray import serve

    @serve.deployment(max_ongoing_requests=8)
    class EightAtATime:
        def __init__(self, score):
            self.score = score

        @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
        async def __call__(self, values):
            return self.score(values)

    expect(ray_serve.check_batching(EightAtATime), checking.WRONG, "max_ongoing_requests=8", "at least 16")


@pytest.mark.cluster
def test_the_batching_check():
    """06.1 runs each answer on Serve (on the test cluster, or a local Ray), Serve listening on a free loopback port."""
    import ray
    from ports import free_port
    from ray import serve

    from helpers.course.cluster import init_ray
    from helpers.pipeline.serving import PATIENT_CONTROLLER, serve_logging

    class NotADeployment:
        def __init__(self, score):
            self.score = score

    expect(ray_serve.check_batching(NotADeployment), checking.WRONG, "not a Serve deployment")

    @serve.deployment
    class Untouched:
        def __init__(self, score):
            self.score = score

        async def __call__(self, value):
            raise NotImplementedError

    @serve.deployment(max_ongoing_requests=32)
    class Right:
        def __init__(self, score):
            self.score = score

        @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
        async def __call__(self, values):
            return self.score(values)

    init_ray()
    expect(ray_serve.check_batching(Right), checking.WRONG, "Serve is not running")  # said before deploying anything
    serve.start(
        http_options={"host": "127.0.0.1", "port": free_port()},
        logging_config=serve_logging(),
        controller_options=PATIENT_CONTROLLER,
    )
    try:
        expect(ray_serve.check_batching(todo), checking.WRONG, "not a Serve deployment")
        untouched = ray_serve.check_batching(Untouched)
        expect(untouched, checking.NOT_DONE)

        @serve.deployment(max_ongoing_requests=32)
        class OneAtATime:  # no @serve.batch: score sees one value per call
            def __init__(self, score):
                self.score = score

            async def __call__(self, value):
                return self.score([value])[0]

        expect(ray_serve.check_batching(OneAtATime), checking.WRONG, "were not grouped", "@serve.batch")

        @serve.deployment  # max_ongoing_requests left at 5
        class FiveAtATime:
            def __init__(self, score):
                self.score = score

            @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
            async def __call__(self, values):
                return self.score(values)

        expect(ray_serve.check_batching(FiveAtATime), checking.WRONG, "max_ongoing_requests")

        @serve.deployment(max_ongoing_requests=32)
        class Reversed:
            def __init__(self, score):
                self.score = score

            @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
            async def __call__(self, values):
                return self.score(values)[::-1]

        expect(ray_serve.check_batching(Reversed), checking.WRONG, "the answer for another value")

        @serve.deployment(max_ongoing_requests=32)
        class OwnFormula:  # right numbers, but `score` bypassed
            def __init__(self, score):
                self.score = score

            @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)
            async def __call__(self, values):
                return [2 * value + 1 for value in values]

        expect(ray_serve.check_batching(OwnFormula), checking.WRONG, "call `self.score`")

        expect(ray_serve.check_batching(Right), checking.DONE, "batches of up to")
        assert ray_serve.EXERCISE_APP not in serve.status().applications, "the check leaves its application deployed"
    finally:
        serve.shutdown()
        ray.shutdown()


def test_the_autoscaling_check_follows_the_gpus_of_any_cluster():
    """06.2: a maximum written in that fits the check's 3 GPUs is refused on 2; a maximum that follows them passes."""

    def three_at_most(resources):  # right on the 3-GPU cluster only
        gpus = int(resources.get("GPU", 0))
        scaling = {"min_replicas": 1, "max_replicas": 3}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if gpus else 0}}

    expect(
        ray_serve.check_autoscaling(three_at_most),
        checking.WRONG,
        "max_replicas=3 on a cluster with 2 GPU(s)",
        "not a number written in",
    )

    def autoscaling_on_cpus_only(resources):
        gpus = int(resources.get("GPU", 0))
        if gpus and gpus < 3:
            return {"num_replicas": gpus, "ray_actor_options": {"num_gpus": 1}}
        scaling = {"min_replicas": 1, "max_replicas": min(4, gpus) if gpus else 4}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1 if gpus else 0}}

    expect(ray_serve.check_autoscaling(autoscaling_on_cpus_only), checking.WRONG, "no `autoscaling_config` on a")

    def every_gpu(resources):  # another right answer: as many replicas as GPUs, "auto" for the count
        gpus = int(resources.get("GPU", 0))
        scaling = {"min_replicas": 1, "max_replicas": gpus or 3, "target_ongoing_requests": 4}
        return {"num_replicas": "auto", "autoscaling_config": scaling, "ray_actor_options": {"num_gpus": min(gpus, 1)}}

    expect(ray_serve.check_autoscaling(every_gpu), checking.DONE)

    def as_gpus_float(resources):  # resources' values are floats: kept as they are
        gpus = resources.get("GPU", 0.0)
        scaling = {"min_replicas": 1, "max_replicas": int(min(4, gpus)) if gpus else 4}
        return {"autoscaling_config": scaling, "ray_actor_options": {"num_gpus": 1.0 if gpus else 0.0}}

    expect(ray_serve.check_autoscaling(as_gpus_float), checking.DONE)
    expect(ray_serve.check_autoscaling(lambda resources: None), checking.WRONG, "return the dict for `.options`")


def test_the_batching_check_refuses_a_batch_size_other_than_the_exercises():
    """06.1: `@serve.batch` with its default `max_batch_size` (10) groups fewer than 16: said before deploying."""
    from ray import serve

    @serve.deployment(max_ongoing_requests=32)
    class DefaultBatch:
        def __init__(self, score):
            self.score = score

        @serve.batch
        async def __call__(self, values):
            return self.score(values)

    expect(
        ray_serve.check_batching(DefaultBatch),
        checking.WRONG,
        "max_batch_size=10",
        "default, left in place",
        "@serve.batch(max_batch_size=16)",
    )

    @serve.deployment(max_ongoing_requests=64)
    class ThirtyTwo:
        def __init__(self, score):
            self.score = score

        async def __call__(self, value):
            return await self.handle(value)

        @serve.batch(max_batch_size=32)
        async def handle(self, values):  # the batched method need not be __call__
            return self.score(values)

    expect(ray_serve.check_batching(ThirtyTwo), checking.WRONG, "`handle` groups up to max_batch_size=32", "16")
    assert ray_serve.batched_methods(ThirtyTwo.func_or_class) == {"handle": 32}

    class NotOne:
        def __init__(self, score):
            self.score = score

    expect(ray_serve.check_batching(NotOne), checking.WRONG, "not a Serve deployment", "@serve.deployment")
