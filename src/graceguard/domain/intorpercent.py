"""Kubernetes ``IntOrString`` budgets: ``2`` or ``"50%"``, scaled the way the disruption controller
scales them (percentages round up)."""

from __future__ import annotations

import dataclasses
import math


class IntOrPercentError(ValueError):
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class IntOrPercent:
    value: int
    percent: bool = False

    def scaled(self, total: int) -> int:
        """The absolute number for ``total`` (percent rounds up, as Kubernetes does for PDBs)."""
        if not self.percent:
            return self.value
        return math.ceil(self.value * total / 100)

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


def parse_int_or_percent(raw: object) -> IntOrPercent:
    """Accept an int, a digit string, or ``"N%"``; raise ``IntOrPercentError`` otherwise."""
    if isinstance(raw, bool):
        raise IntOrPercentError(f"expected an integer or a percentage, got {raw!r}")
    if isinstance(raw, int):
        if raw < 0:
            raise IntOrPercentError(f"must not be negative, got {raw}")
        return IntOrPercent(raw)
    if isinstance(raw, str):
        text = raw.strip()
        percent = text.endswith("%")
        digits = text[:-1] if percent else text
        if digits.isdigit() and digits.isascii():
            number = int(digits)
            if percent and number > 100:
                raise IntOrPercentError(f"a percentage must be at most 100%, got {raw!r}")
            return IntOrPercent(number, percent)
    raise IntOrPercentError(f"expected an integer or a percentage such as 50%, got {raw!r}")
