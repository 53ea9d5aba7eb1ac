"""The rules a budget and each of its sections check when they are made (course.budget): a broken one is a ValueError
that names the field and the fix."""

from __future__ import annotations

from dataclasses import fields


class Checked:
    """A budget, or a section of one, that checks its rules when it is made (``replace`` and ``from_dict`` too):
    every number above 0, a learning rate at most 1, None only where the field allows it (``int | None``: all), the
    batch sizes a non-empty tuple of them; then its own (:meth:`rules`). A broken one is a ValueError that names it."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, (Checked, str)):  # a section checked itself; a name has no rule here
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
            f"{type(self).__name__}.{name}={value!r} {wrong}: fix the budget in course/budget.py (or the code that "
            f"changed it)."
        )


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
