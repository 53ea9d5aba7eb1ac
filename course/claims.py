"""What a lesson's measurements show: a :class:`Claim` is a ratio between figures that a lesson's run records
(``results.record``), held by ``make run``'s claims report and tests/lessons/test_what_they_show.py. The lessons
(course.lessons.LESSONS) list theirs."""

from __future__ import annotations

from dataclasses import dataclass

# What a speed-up claim times (Claim.speedup_of), in the words `make run`'s claims report prints for each kind it shows
SPEEDUPS_OF: dict[str, str] = {
    "waiting": "sleeps that stand for waits on something outside, which overlap however few cores there are",
    "computing": "real work, which gains at most as many times as the machine has cores",
    "start-up": (
        "the fixed cost before the function runs on Ray Train's workers (the controller, the worker processes "
        "importing torch, the process group), which local mode skips"
    ),
}


@dataclass(frozen=True)
class Claim:
    """What one of a lesson's measurements shows, held by a test (tests/lessons/test_what_they_show.py) on the figures
    its run recorded (``results.record``): ``larger`` is at least ``factor`` times ``smaller`` (or times 1, without
    ``smaller``). Ratios only, never absolute times, and a factor with room for a loaded machine.

    A speed-up says what it times (``speedup_of``): ``"waiting"`` where sleeps stand for waits on something outside (a
    bucket, a remote call), which overlap however few cores there are, and the lesson's text names the wait;
    ``"computing"`` where the work is real, which gains at most as many times as the machine has cores;
    ``"start-up"`` where the figures time what a run on workers costs before the function runs there, which local mode
    (``ScalingConfig(num_workers=0)``: the function in the calling process) skips: Ray Train's controller actor and its
    placement group, the worker processes (each importing torch and the function's modules), and torch.distributed's
    process group. Other claims (counts, accuracies) leave it None.

    A claim about a section that some runs rightly skip (02c's node that leaves, on one node) says where
    (``absent_where``): ``make run``'s report names it as not measured there, rather than as a claim that fails."""

    says: str  # the effect, as the lesson's text names it
    larger: str  # a figure of the lesson's record
    factor: float
    smaller: str | None = None  # another figure of the record
    speedup_of: str | None = None  # a kind of SPEEDUPS_OF ("waiting", "computing", "start-up"), or None: not one
    absent_where: str | None = None  # where a run rightly records none of its figures (a section it skips there)

    def __post_init__(self) -> None:
        if self.speedup_of is not None and self.speedup_of not in SPEEDUPS_OF:
            kinds = ", ".join(repr(kind) for kind in SPEEDUPS_OF)
            raise ValueError(f"{self.says}: speedup_of={self.speedup_of!r}, not one of {kinds} or None")

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

    def measured(self, figures: dict[str, float]) -> str:
        """What a run's ``figures`` measured of it, each number named: the ratio of its two figures (both, where the
        smaller is 0), or its one figure."""
        larger = figures[self.larger]
        if not self.smaller:
            return f"{self.larger} = {larger:.3g}"
        smaller = figures[self.smaller]
        if smaller == 0:
            return f"{self.larger} = {larger:.3g}, {self.smaller} = 0"
        return f"{self.larger} = {larger / smaller:.3g} x {self.smaller}"

    def __str__(self) -> str:
        than = f"{self.factor:g} x {self.smaller}" if self.smaller else f"{self.factor:g}"
        timed = f" (times {self.speedup_of})" if self.speedup_of else ""
        return f"{self.says}: {self.larger} >= {than}{timed}"
