"""The error codes a response carries, counted as Kafka's RequestMetrics ErrorsPerSec does
(every ``error_code`` field of the response, NONE included).

Used for the decoded (non-hot) responses only: Produce and Fetch are encoded by hand from
buffers and are not walked, so their errors are not in this metric.

The walk visits only the fields that can hold an error code or nested entities (a plan per
class), and counts an entity object that appears many times in one response (a result shared
by repeated resources) once, multiplied: a response of 300,000 config entries is counted in
milliseconds, not seconds of a stalled event loop.
"""

import dataclasses
import functools
from collections import Counter
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, classify_field


def error_counts(response: Any) -> Counter[int]:
    return _entity(response, {}) if _is_entity(response) else Counter()


def _is_entity(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


@functools.cache
def _plan(cls: type) -> tuple[bool, tuple[str, ...]]:
    """(whether ``cls`` has an ``error_code``, the fields that may hold entities)."""
    has_error = False
    nested = []
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            has_error = True
            continue
        try:
            kind = classify_field(f)
        except Exception:  # not a kio-style field: look inside it
            nested.append(f.name)
            continue
        if isinstance(kind, EntityField | EntityTupleField):
            nested.append(f.name)
    return has_error, tuple(nested)


def _entity(value: Any, seen: dict[int, Counter[int]]) -> Counter[int]:
    done = seen.get(id(value))
    if done is not None:
        return done
    counts: Counter[int] = Counter()
    cls: Any = type(value)
    has_error, nested = _plan(cls)
    if has_error:
        code = value.error_code
        if isinstance(code, int):
            counts[int(code)] += 1
    for name in nested:
        item = getattr(value, name)
        if isinstance(item, tuple | list):
            for x in item:
                if _is_entity(x):
                    counts.update(_entity(x, seen))
        elif _is_entity(item):
            counts.update(_entity(item, seen))
    seen[id(value)] = counts  # the response keeps ``value`` alive: its id stays unique
    return counts
