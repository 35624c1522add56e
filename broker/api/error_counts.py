"""The error codes a response carries, counted as Kafka's RequestMetrics ErrorsPerSec does
(every ``error_code`` field of the response, NONE included).

Used for the decoded (non-hot) responses only: Produce and Fetch are encoded by hand from
buffers and are not walked, so their errors are not in this metric.
"""

import dataclasses
from collections import Counter
from typing import Any


def error_counts(response: Any) -> Counter[int]:
    counts: Counter[int] = Counter()
    _walk(response, counts)
    return counts


def _walk(value: Any, counts: Counter[int]) -> None:
    if isinstance(value, tuple | list):
        for item in value:
            _walk(item, counts)
        return
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if f.name == "error_code" and isinstance(item, int):
            counts[int(item)] += 1
        elif isinstance(item, tuple | list) or dataclasses.is_dataclass(item):
            _walk(item, counts)
