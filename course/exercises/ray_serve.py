"""The "Your turn" checks of notebook 06 (Ray Serve) (rules: ``course.exercises.checking``)."""

from __future__ import annotations

import inspect
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from course.deadline import first_line
from course.exercises.checking import NotDone, Raised, Verdict, attach_ray, attempt, check, in_time, learner_error

EXERCISE_APP = "exercise-06"  # the application a check deploys, and deletes again


def score_batch(values: list[float]) -> list[tuple[float, int, str]]:
    """06.1's model: scores a whole list of numbers in one call. Each answer says the size of the list it came in and
    which call made it (a call's own tag), so the check can tell a batch scored once from a batch scored per request."""
    call = uuid.uuid4().hex[:8]
    return [(round(2 * value + 1, 6), len(values), call) for value in values]


def _serve_is_running() -> bool:
    from ray import serve

    return bool(serve.status().proxies)


def _call_once(deployment: Any) -> None:
    """Call the class of ``deployment`` once, here, outside Serve: raises ``NotDone`` if it is still a stub.

    Anything else it raises is left for the check to find when it runs the deployment on Serve."""
    import asyncio

    async def call() -> None:
        result = deployment.func_or_class(score_batch)(1)
        if inspect.isawaitable(result):
            await asyncio.wait_for(result, timeout=10)

    try:
        asyncio.run(call())
    except NotImplementedError:
        raise NotDone from None
    except Exception:  # noqa: S110  (a right answer may need Serve to run at all)
        pass


def batched_methods(cls: type) -> dict[str, int]:
    """The methods of ``cls`` decorated with ``@serve.batch``, with the ``max_batch_size`` each was given."""
    found = {}
    for name in dir(cls):
        method = inspect.getattr_static(cls, name, None)
        size = getattr(method, "_get_max_batch_size", None)
        if callable(size):
            found[name] = int(size())
    return found


def _pydantic_findings(error: Exception) -> str:
    """A pydantic ``ValidationError`` in a learner's words: each field Serve refused and what it wants."""
    try:
        found = [
            f"`{'.'.join(str(part) for part in item['loc']) or 'options'}`: {item['msg']}"
            + (f" (it got {item['input']!r})" if "input" in item and not isinstance(item["input"], dict) else "")
            for item in error.errors()  # type: ignore[attr-defined]
        ]
    except Exception:  # noqa: BLE001  (not pydantic's: its first line says it)
        return first_line(error, 200)
    return "; ".join(found) or first_line(error, 200)


def _what_it_is(value: Any) -> str:
    """``value`` in a learner's words: a plain class, a function, or an object of its type."""
    if isinstance(value, type):
        return f"`{value.__name__}` is a plain class"
    if callable(value) and hasattr(value, "__name__"):
        return f"`{value.__name__}` is a function"
    return f"it is a {type(value).__name__}"


def check_batching(deployment: Any, max_batch_size: int = 16) -> Verdict:
    """06.1: ``deployment``, bound to a scoring function, groups requests arriving one at a time into batches."""
    from ray import serve
    from ray.serve import Deployment

    from course.serving import serve_logging

    def run() -> str:
        if not isinstance(deployment, Deployment):
            raise AssertionError(
                f"{_what_it_is(deployment)}, not a Serve deployment: decorate the class with "
                "`@serve.deployment` (and its method with `@serve.batch`)"
            )
        in_time(  # untouched? find out here, without starting a replica
            _call_once,
            deployment,
            limit_s=FIRST_CALL_LIMIT_S,
            late=f"your class, made once here (outside Serve) and called with one value, had not returned after "
            f"{FIRST_CALL_LIMIT_S} s: look for a loop in `__init__` or in the method that never ends, or a wait "
            "for something that never comes. The check stopped it",
        )
        taken = deployment.max_ongoing_requests
        sizes = batched_methods(deployment.func_or_class)
        assert sizes or taken >= max_batch_size, (
            f"no method of `{deployment.func_or_class.__name__}` has `@serve.batch`, so every request reaches it "
            "alone and `score` runs once per value; and a replica takes only "
            f"`max_ongoing_requests={taken}` requests at a time. Decorate the method that calls `score` with "
            f"`@serve.batch(max_batch_size={max_batch_size})` (it then takes a list of values), and let a replica "
            f"take at least {max_batch_size} in `@serve.deployment(...)`"
        )
        assert taken >= max_batch_size, (
            f"a replica takes only `max_ongoing_requests={taken}` requests at a time: a batch of up to "
            f"{max_batch_size} never fills. Let it take at least {max_batch_size} in `@serve.deployment(...)`"
        )
        if sizes and max_batch_size not in sizes.values():
            name, size = next(iter(sizes.items()))
            default = " (`@serve.batch`'s default, left in place)" if size == 10 else ""
            raise AssertionError(
                f"`{name}` groups up to max_batch_size={size} requests{default}; the exercise groups up to "
                f"{max_batch_size}: `@serve.batch(max_batch_size={max_batch_size})`"
            )
        attach_ray()
        started = None if _serve_is_running() else _start_serve()  # the port of a Serve started here, to stop again
        values = np.random.default_rng().integers(0, 1000, 48).tolist()  # 48 requests at once, one value each
        quiet = serve_logging()

        try:  # in the check's own thread (checking.check), where no event loop runs, as Serve's handles need
            handle = attempt(  # Serve's logging as the lesson's: no line per request
                serve.run, deployment.bind(score_batch), name=EXERCISE_APP, route_prefix=None, logging_config=quiet
            )
            _answers(handle, values[:1])  # one request first: an answer that fails, fails once, not 48 times
            answers = _answers(handle, values)
        finally:
            serve.delete(EXERCISE_APP)
            if started is not None:
                _stop_serve(started)
        for value, answer in zip(values, answers, strict=True):
            assert isinstance(answer, tuple | list) and len(answer) == 3, (
                f"a request for {value} got {answer!r}: answer each request with what `score` returned for its value, "
                "whole: `score` answers each value with a tuple (its score, the batch's size, a tag for the call), and "
                "the check reads all three (call `self.score` with the whole batch)"
            )
            assert answer[0] == 2 * value + 1, (
                f"the request for {value} got the answer for another value ({answer[0]}): return `score`'s answers "
                "in the order of the batch, one per request"
            )
        sizes = sorted({int(answer[1]) for answer in answers})
        used = Counter(answer[2] for answer in answers)  # how many requests each call of `score` answered
        wasted = {answer[2]: int(answer[1]) for answer in answers if used[answer[2]] < int(answer[1])}
        assert not wasted, (
            f"`score` ran on a whole batch (up to {max(wasted.values())} values) {len(wasted)} times, and each run "
            "answered fewer requests than the batch held: call `self.score` once per batch and hand each request its "
            "own answer from that one list"
        )
        batched = batched_methods(deployment.func_or_class)
        assert max(sizes) > 1 or not batched, (
            f"the requests reached `{next(iter(batched), '')}` grouped (it has `@serve.batch`), but `score` was called "
            "once per value, with one value each time: call `self.score` once with the whole list of values"
        )
        assert max(sizes) > 1, (
            "every call of `score` had one value: the requests were not grouped. Decorate the method with "
            f"`@serve.batch(max_batch_size={max_batch_size})` and let it take a list of values"
        )
        assert max(sizes) <= max_batch_size, (
            f"a batch of {max(sizes)} values: keep batches to {max_batch_size} (`max_batch_size`)"
        )
        return f"48 requests arriving one at a time were answered in batches of up to {max(sizes)}, each answer its own"

    def worth_ray() -> bool:  # Ray attached in the caller's thread, only for an answer the check deploys
        return (
            isinstance(deployment, Deployment)
            and deployment.max_ongoing_requests >= max_batch_size
            and max_batch_size in (batched_methods(deployment.func_or_class).values() or [max_batch_size])
        )

    return check("06.1", run, limit_s=BATCHING_LIMIT_S, ray_first=worth_ray)


BATCHING_LIMIT_S = 300  # 06.1 in all: Serve started, the answer deployed, 49 requests answered
FIRST_CALL_LIMIT_S = 30  # 06.1: the learner's class made and called once, outside Serve (it takes milliseconds)
ANSWER_WAIT_S = 60  # 06.1: how long a request may wait for its answer (a batch of `score_batch` takes milliseconds)


def _answers(handle: Any, values: list) -> list:
    """Send one request per value at once and wait for every answer; at the first failure, cancel the others (a wrong
    answer fails once in the notebook, not once per request) and say what went wrong in the learner's words."""
    from ray.exceptions import GetTimeoutError

    responses = [handle.remote(value) for value in values]
    try:
        return [response.result(timeout_s=ANSWER_WAIT_S) for response in responses]
    except NotImplementedError:
        raise NotDone from None
    except GetTimeoutError:  # the check's wait, not an error of the learner's code
        raise AssertionError(
            f"no answer within {ANSWER_WAIT_S} s for a request Serve handed to your deployment: does your method "
            "return? Look for an `await` that never ends (`asyncio.sleep` of a long time, an event never set) or a "
            "loop that never stops"
        ) from None
    except Exception as error:  # noqa: BLE001  (Ray's report of the learner's error)
        raise Raised(_failure(error)) from None
    finally:
        for response in responses:
            response.cancel()


def _failure(error: Exception) -> str:
    """The verdict for a request the learner's deployment failed: Serve's own rule when it broke one."""
    text = str(error)
    if "doesn't preserve batch size" in text or "object of type" in text and "has no len()" in text:
        return (
            "a method with `@serve.batch` takes a list and must return a list of the same length, one answer per "
            f"request, in the order of the list (Serve said: {learner_error(error)}). Replica logs above, if any, say "
            "nothing more"
        )
    if "can't be used in 'await' expression" in text:
        return (
            f"a request failed in your deployment: {learner_error(error)}. Your method is `async`, but `score` is a "
            "plain function: call it without `await`, `self.score(values)`"
        )
    return f"a request failed in your deployment: {learner_error(error)}"


def _start_serve() -> int:
    """Start Serve as the lesson's cell does (the HTTP proxy on 127.0.0.1 only, one proxy, quiet): its port."""
    from ray import serve

    from course.serving import PATIENT_CONTROLLER, serve_logging, serve_port

    port = serve_port()
    serve.start(
        http_options={"host": "127.0.0.1", "port": port},
        proxy_location="HeadOnly",
        logging_config=serve_logging(),
        controller_options=PATIENT_CONTROLLER,
    )
    return port


def _stop_serve(port: int) -> None:
    """Stop the Serve a check started, and wait for its proxy to free ``port``."""
    from ray import serve

    from course.serving import stops_listening

    serve.shutdown()
    stops_listening(port)


MODEL_MAX_ONGOING = 32  # 06.2: the lesson's Model takes two batches of 16 at a time (unless the options say other)


def check_autoscaling(scaling_options: Callable[[dict[str, float]], dict]) -> Verdict:
    """06.2: ``scaling_options(resources)`` gives a model deployment's ``.options(...)``: it scales with the load,
    keeps a replica ready, and asks for one GPU per replica only on a cluster with GPUs, no more replicas than GPUs."""
    from ray import serve

    @serve.deployment(max_ongoing_requests=MODEL_MAX_ONGOING)
    class Model:  # what the options go to: Serve checks them as it would for the lesson's Model
        pass

    def options_for(resources: dict[str, float]) -> tuple[dict, Any]:
        try:
            options = attempt(scaling_options, dict(resources))
        except Raised as error:
            if "KeyError: 'GPU'" in str(error):
                raise AssertionError(
                    f"it raised KeyError: 'GPU' for the resources {resources}: `ray.cluster_resources()` has no "
                    '"GPU" key on a cluster without GPUs. Read it with `resources.get("GPU", 0)`'
                ) from None
            raise
        assert isinstance(options, Mapping), f"it returned a {type(options).__name__}: return the dict for `.options`"
        try:
            configured = Model.options(**options)
        except Exception as error:  # Serve refuses the options: its message says why
            raise AssertionError(
                f"Serve refuses these options for the resources {resources} ({_pydantic_findings(error)})"
            ) from None
        return dict(options), configured

    def run() -> str:
        options, configured = options_for({"CPU": 8.0})
        assert "num_replicas" not in options or options["num_replicas"] == "auto", (
            "a fixed `num_replicas` does not follow the load: give an `autoscaling_config` instead"
        )
        scaling = configured._deployment_config.autoscaling_config
        assert scaling is not None, (
            "no `autoscaling_config`: without it the deployment keeps one replica whatever the load"
        )
        assert scaling.min_replicas >= 1, (
            f"min_replicas={scaling.min_replicas}: with no replica kept, the first request after a quiet spell waits "
            "for a replica to start and load the model (seconds). Keep at least one"
        )
        assert scaling.max_replicas > scaling.min_replicas, (
            f"min_replicas={scaling.min_replicas} and max_replicas={scaling.max_replicas}: nothing can scale; let "
            "max_replicas be higher"
        )
        taken = configured.max_ongoing_requests
        assert scaling.target_ongoing_requests < taken, (
            f"target_ongoing_requests={scaling.target_ongoing_requests:g}, but a replica takes at most "
            f"max_ongoing_requests={taken} at a time (the lesson's `Model`): its load never goes above the target, "
            "so Serve never adds a replica. Keep the target below what a replica takes"
        )
        gpus = (options.get("ray_actor_options") or {}).get("num_gpus", 0)
        assert not gpus, "this cluster has no GPU ({'CPU': 8.0}): a replica that asks for one waits forever"
        on_cpus = options
        options, configured = options_for({"CPU": 32.0, "GPU": 3.0})
        actor = options.get("ray_actor_options") or {}
        assert actor.get("num_gpus") == 1, (
            f"on a cluster with 3 GPUs each replica should get one: `ray_actor_options={{'num_gpus': 1}}` "
            f"(it asks for {actor.get('num_gpus', 0)})"
            + (
                ". Your options are the same as for a cluster without GPUs: decide from the `resources` your "
                "function is given, not from this machine's (`ray.cluster_resources()`, the notebook's `plan`)"
                if options == on_cpus
                else ""
            )
        )
        scaling = configured._deployment_config.autoscaling_config
        assert scaling is None or scaling.max_replicas <= 3, (  # none at all: the loop below names it
            f"max_replicas={scaling.max_replicas} on a cluster with 3 GPUs, one per replica: the replicas beyond 3 "
            "would wait forever for a GPU. Take the smaller of your maximum and the GPUs"
        )
        options, _ = options_for({"CPU": 8.0, "GPU": 0.0})
        assert not (options.get("ray_actor_options") or {}).get("num_gpus"), (
            "`resources` lists GPU: 0.0 here: a GPU entry with the value 0 is no GPU. Decide from how many GPUs "
            "`resources` counts, not from whether the key is there"
        )
        for gpus in (3.0, 2.0, 1.0):  # the maximum follows the GPUs; the model scales there too
            options, configured = options_for({"CPU": 32.0, "GPU": gpus})
            scaling = configured._deployment_config.autoscaling_config
            assert scaling is not None, (
                f"no `autoscaling_config` on a cluster with {gpus:g} GPU(s)"
                + (f" (a fixed `num_replicas={options['num_replicas']}`)" if "num_replicas" in options else "")
                + ": the model should scale there too, up to one replica per GPU"
            )
            given = (options.get("ray_actor_options") or {}).get("num_gpus", 0)
            assert given == 1, (
                f"on a cluster with {gpus:g} GPU(s) each replica should get one, a whole one: "
                f"`ray_actor_options={{'num_gpus': 1}}` (it asks for {given})"
            )
            top = scaling.max_replicas
            assert top <= gpus, (
                f"max_replicas={top} on a cluster with {gpus:g} GPU(s), one per replica: the replicas beyond "
                f"{gpus:g} would wait forever for a GPU. Take the maximum from `resources` (the smaller of your "
                "maximum and the GPUs), not a number written in"
            )
            assert scaling.min_replicas >= 1, (
                f"min_replicas={scaling.min_replicas} on a cluster with {gpus:g} GPU(s): no replica is kept ready "
                "there, so the first request after a quiet spell waits for one to start and load the model. Keep one"
            )
            assert gpus < 2 or scaling.max_replicas > scaling.min_replicas, (
                f"min_replicas={scaling.min_replicas} and max_replicas={scaling.max_replicas} on a cluster with "
                f"{gpus:g} GPUs: nothing can scale. That many replicas hold a GPU each all the time, even with no "
                "load. Keep one replica ready on every cluster; the GPUs set only the maximum"
            )
            taken = configured.max_ongoing_requests
            assert scaling.target_ongoing_requests < taken, (
                f"target_ongoing_requests={scaling.target_ongoing_requests:g} on a cluster with {gpus:g} GPU(s), but "
                f"a replica takes at most max_ongoing_requests={taken} at a time: Serve never adds a replica there"
            )
        return "it scales with the load, keeps a replica ready, and takes one GPU per replica only where there are GPUs"

    return check("06.2", run)
