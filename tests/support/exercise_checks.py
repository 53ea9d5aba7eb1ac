"""What the tests of the exercise checks use besides their conftest's fixture: an untouched answer (``todo``) and
``expect`` (a verdict's state and the phrases its message must hold)."""

from __future__ import annotations

from course.exercises import checking


def todo(*args, **kwargs):
    raise NotImplementedError


def expect(verdict: checking.Verdict, state: str, *phrases: str) -> None:
    assert verdict.state == state, verdict
    for phrase in phrases:
        assert phrase in verdict.message, verdict


def leave_ray() -> None:
    """Detach this process from Ray, after collecting what the checks left unfinished (a Ray Data iterator whose
    clean-up needs Ray): collected later, with Ray gone, its clean-up would start a Ray of its own, attached to the
    tests' cluster without the course's runtime env, and the next module's ``init_ray`` would keep that one."""
    import gc

    import ray

    gc.collect()
    ray.shutdown()
