"""Typed config values: parse a string as Kafka's ConfigDef does, validate, and render back.

Rendering follows ConfigDef.convertToString, so values read back through DescribeConfigs
look as they do on Apache Kafka (``true``, ``1048588``, ``0.5``, ``compact,delete``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

__all__ = [
    "AnyOf",
    "ConfigType",
    "ConfigValueError",
    "Range",
    "Validator",
    "ValueList",
    "java_double_str",
    "parse_value",
    "render_value",
]

Value = bool | int | float | str | list[str] | None

_INT_RANGES = {
    "SHORT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "LONG": (-(2**63), 2**63 - 1),
}
_LIST_SPLIT = re.compile(r"\s*,\s*")


class ConfigType(Enum):
    """Kafka's ConfigDef types; ``wire`` is DescribeConfigs' ConfigType code."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9

    @property
    def wire(self) -> int:
        return self.value


class ConfigValueError(ValueError):
    """A value that does not parse or validate; the message is for humans."""


@dataclass(frozen=True, slots=True)
class Range:
    lo: float | None = None
    hi: float | None = None

    def check(self, v: Value) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        if self.lo is not None and v < self.lo:
            return f"Value must be at least {_num(self.lo)}"
        if self.hi is not None and v > self.hi:
            return f"Value must be no more than {_num(self.hi)}"
        return None


@dataclass(frozen=True, slots=True)
class AnyOf:
    """The (string) value must be one of ``choices``."""

    choices: tuple[str, ...]
    case_insensitive: bool = False

    def check(self, v: Value) -> str | None:
        if not isinstance(v, str):
            return None
        ok = (
            v.lower() in {c.lower() for c in self.choices}
            if self.case_insensitive
            else v in self.choices
        )
        return None if ok else f"String must be one of: {', '.join(self.choices)}"


@dataclass(frozen=True, slots=True)
class ValueList:
    """Every list element must be one of ``choices``."""

    choices: tuple[str, ...]
    allow_empty: bool = True

    def check(self, v: Value) -> str | None:
        if not isinstance(v, list):
            return None
        if not v and not self.allow_empty:
            return "Value must not be empty"
        bad = [x for x in v if x not in self.choices]
        return f"Invalid value(s) {bad}; allowed: {', '.join(self.choices)}" if bad else None


Validator = Range | AnyOf | ValueList


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def parse_value(ctype: ConfigType, raw: str) -> Value:
    """Parse ``raw`` as ConfigDef.parseType would (strings are trimmed)."""
    s = raw.strip()
    t = ctype.name
    if t == "BOOLEAN":
        low = s.lower()
        if low not in ("true", "false"):
            raise ConfigValueError("Expected value to be either true or false")
        return low == "true"
    if t in _INT_RANGES:
        if not re.fullmatch(r"[+-]?\d+", s):
            raise ConfigValueError(f"Not a number of type {t}")
        n = int(s)
        lo, hi = _INT_RANGES[t]
        if not lo <= n <= hi:
            raise ConfigValueError(f"Not a number of type {t}")
        return n
    if t == "DOUBLE":
        try:
            f = float(s)
        except ValueError:
            raise ConfigValueError("Not a number of type DOUBLE") from None
        return f
    if t == "LIST":
        return [] if not s else _LIST_SPLIT.split(s)
    return s  # STRING, CLASS, PASSWORD


def java_double_str(x: float) -> str:
    """Double.toString: plain between 1e-3 and 1e7, else ``d.dddE<n>``; shortest digits."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    a = abs(x)
    if 1e-3 <= a < 1e7:
        s = repr(x)
        if "e" in s:  # cannot happen in this range, kept for safety
            s = format(Decimal(s), "f")
        return s if "." in s else s + ".0"
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    e10 = int(exp) + len(digits) - 1
    mant = ds[0] + "." + (ds[1:] or "0")
    return f"{'-' if sign else ''}{mant}E{e10}"


def render_value(ctype: ConfigType, v: Value) -> str | None:
    """ConfigDef.convertToString."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(v)
    if ctype is ConfigType.DOUBLE and isinstance(v, int | float):
        return java_double_str(float(v))
    return str(v)
