"""The rules every exercise check keeps (course.exercises.checking): "not done yet" for an untouched exercise,
a verdict for code that raises, answers of another shape, or code that runs past the limit; never an exception."""

from __future__ import annotations

from exercise_checks import expect, todo
from ray.train import ScalingConfig

from course.exercises import (
    checking,
    local_finetune,
    ray_train_finetune,
)


def test_an_untouched_exercise_is_not_done_yet_and_is_recorded(capsys, tmp_path):
    verdict = local_finetune.check_freeze_backbone(todo)
    expect(verdict, checking.NOT_DONE, "replace `raise NotImplementedError`")
    assert "… exercise 01.1: replace" in capsys.readouterr().out
    assert checking.read("01", tmp_path)["01.1"]["state"] == checking.NOT_DONE


def test_code_that_raises_is_a_finding_not_a_crash():
    expect(
        ray_train_finetune.check_best_evaluation(lambda history: history["nope"]), checking.WRONG, "it raised KeyError"
    )


def test_a_name_the_notebook_lacks_is_named_with_the_fix():
    """06.2 answered with `ray.cluster_resources()` in a notebook that imports `from ray import serve` only (walk of
    3995af6): the bare NameError now says to import the name."""
    from course.exercises import ray_serve

    def reads_this_machine(resources):
        gpus = ray_not_imported.cluster_resources().get("GPU", 0)  # noqa: F821
        return {"autoscaling_config": {"min_replicas": 1, "max_replicas": 4}, "ray_actor_options": {"num_gpus": gpus}}

    expect(
        ray_serve.check_autoscaling(reads_this_machine),
        checking.WRONG,
        "NameError: name 'ray_not_imported' is not defined",
        "Import it in your cell",
    )


def test_an_answer_of_a_shape_the_check_did_not_expect_is_a_verdict():
    """02.2 with a function that returns only the ScalingConfig: the check unpacks a pair (a TypeError before)."""
    only_the_config = lambda workers, batch, resources: ScalingConfig(num_workers=workers)  # noqa: E731
    expect(ray_train_finetune.check_scaling(only_the_config), checking.WRONG, "return a pair", "ScalingConfig")

    def surprise():  # a check body that fails in a way no assertion foresaw
        raise TypeError("cannot unpack non-iterable int object")

    expect(checking.check("02.2", surprise), checking.WRONG, "could not use what your code gave it", "TypeError")

    def exits():  # learner code that calls sys.exit(): a verdict, and the notebook's kernel goes on
        raise SystemExit(1)

    expect(checking.check("02.2", exits), checking.WRONG, "SystemExit")


def test_a_check_that_does_not_finish_in_time_gives_a_verdict_at_its_limit():
    import threading
    import time

    release = threading.Event()
    started = time.monotonic()
    verdict = checking.check("02.1", lambda: release.wait(60) and "never", limit_s=0.5, late="Look at `x`")
    release.set()
    expect(verdict, checking.WRONG, "no verdict within the check's time limit of 0 s", "Look at `x`")
    assert time.monotonic() - started < 30, "the verdict waited for the answer (60 s), not for its limit"


def test_a_learner_loop_that_never_ends_is_stopped_at_the_limit_not_left_spinning_in_the_kernel():
    import threading

    stopped = threading.Event()

    def spins() -> str:
        try:
            while True:
                pass
        finally:
            stopped.set()

    verdict = checking.check("07.1", spins, limit_s=0.3)
    expect(verdict, checking.WRONG, "no verdict within the check's time limit")
    assert stopped.wait(60), "the learner's loop went on after the verdict"
    for thread in [t for t in threading.enumerate() if t.name == "within-spins"]:
        thread.join(60)
    assert not any(t.name == "within-spins" for t in threading.enumerate())


def test_a_failure_in_ray_is_told_by_the_learners_own_error():
    """Ray wraps what the learner's code raised; the verdict names that, not Ray's wrapper or its retry advice."""
    ray_data = (
        "\x1b[36mray::MapWorker(MapBatches(Bad)).submit()\x1b[39m (pid=1, ip=127.0.0.1)\n"
        '  File "/tmp/x.py", line 7, in __call__\n    raise KeyError("pixel_values")\n'
        "KeyError: 'pixel_values'\n\nThe above exception was the direct cause of the following exception:\n\n"
        "\x1b[36mray::MapWorker(MapBatches(Bad)).submit()\x1b[39m (pid=1, ip=127.0.0.1)\n"
        "ray.exceptions.UserCodeException: UDF failed to process a data block.\n"
        "To change retry attempts, backoff, or which errors are retried, configure `ray.data.DataContext` if"
    )
    assert checking.learner_error(RuntimeError(ray_data)) == "KeyError: 'pixel_values'"
    train = "Training failed.\nTraceback (most recent call last):\n  File x\nValueError: no column `x`"
    assert checking.learner_error(RuntimeError(train)) == "ValueError: no column `x`"
    # a module the notebook never imported: the verdict says where the name must come from
    unknown = (
        "Training failed.\nTraceback (most recent call last):\n  File x\n" + "NameError: name 'tempfile' is not defined"
    )
    told = checking.learner_error(RuntimeError(unknown))
    assert told.startswith("NameError: name 'tempfile' is not defined") and "Import it in your cell" in told
