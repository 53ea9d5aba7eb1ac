"""What a lesson's measurements show: a :class:`Claim` is a ratio between figures that a lesson's run records
(``results.record``), held by ``make run``'s claims report and tests/lessons/test_what_they_show.py. The lessons
(course.lessons.LESSONS) list theirs."""

from __future__ import annotations

from dataclasses import dataclass

SPEEDUPS_OF = ("waiting", "computing", None)  # what a speed-up claim times (Claim.speedup_of)


@dataclass(frozen=True)
class Claim:
    """What one of a lesson's measurements shows, held by a test (tests/lessons/test_what_they_show.py) on the figures
    its run recorded (``results.record``): ``larger`` is at least ``factor`` times ``smaller`` (or times 1, without
    ``smaller``). Ratios only, never absolute times, and a factor with room for a loaded machine.

    A speed-up says what it times (``speedup_of``): ``"waiting"`` where sleeps stand for waits on something outside (a
    bucket, a remote call), which overlap however few cores there are, and the lesson's text names the wait;
    ``"computing"`` where the work is real, which gains at most as many times as the machine has cores. Other claims
    (counts, accuracies) leave it None.

    A claim about a section that some runs rightly skip (02c's node that leaves, on one node) says where
    (``absent_where``): ``make run``'s report names it as not measured there, rather than as a claim that fails."""

    says: str  # the effect, as the lesson's text names it
    larger: str  # a figure of the lesson's record
    factor: float
    smaller: str | None = None  # another figure of the record
    speedup_of: str | None = None  # "waiting" (sleeps), "computing" (real work), or None: not a speed-up
    absent_where: str | None = None  # where a run rightly records none of its figures (a section it skips there)

    def __post_init__(self) -> None:
        if self.speedup_of not in SPEEDUPS_OF:
            raise ValueError(f"{self.says}: speedup_of={self.speedup_of!r}, not one of {SPEEDUPS_OF}")

    def holds(self, figures: dict[str, float]) -> bool:
        return figures[self.larger] >= self.factor * (figures[self.smaller] if self.smaller else 1.0)

    def figure_names(self) -> list[str]:
        """The figures of the record it reads."""
        return [name for name in (self.larger, self.smaller) if name]

    def not_measured(self, figures: dict[str, float]) -> str | None:
        """Why a run that recorded ``figures`` could not measure this claim (``absent_where``, where none of its
        figures is there), or None. A claim without ``absent_where`` is always measured: a figure missing is a fault
        (:meth:`problem`)."""
        absent = not any(name in figures for name in self.figure_names())
        return self.absent_where if self.absent_where and absent else None

    def problem(self, figures: dict[str, float]) -> str | None:
        """Why the claim does not hold on a run's ``figures`` (a figure it did not record, or the figures), or None."""
        missing = [name for name in self.figure_names() if name not in figures]
        if missing:
            return f"it recorded no {', '.join(missing)}"
        return None if self.holds(figures) else f"the figures are {figures}"

    def __str__(self) -> str:
        than = f"{self.factor:g} x {self.smaller}" if self.smaller else f"{self.factor:g}"
        return f"{self.says}: {self.larger} >= {than}"
