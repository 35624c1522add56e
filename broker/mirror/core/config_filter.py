"""Which of a source topic's configs the mirror copies: the source's dynamic topic configs, minus
``mirror.topic.properties.exclude`` and the destination's own keys, replace ours."""

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from ...controller import mirror_config

# IncrementalAlterConfigs operation codes
SET: Final = 0
DELETE: Final = 1


def excluded(key: str, patterns: Sequence[re.Pattern[str]]) -> bool:
    return key in mirror_config.DESTINATION_TOPIC_KEYS or any(p.fullmatch(key) for p in patterns)


def config_ops(
    source: Mapping[str, str],
    local: Mapping[str, str],
    patterns: Sequence[re.Pattern[str]],
    validate: Callable[[str, str], str],
) -> list[tuple[str, int, str | None]]:
    """IncrementalAlterConfigs ops making ``local`` match ``source`` outside the excluded keys.
    Source values this broker refuses (unknown or invalid keys) are ignored, not deleted here."""
    wanted: dict[str, str] = {}
    refused: set[str] = set()
    for key, value in source.items():
        if excluded(key, patterns):
            continue
        try:
            wanted[key] = validate(key, value)
        except Exception:
            refused.add(key)
    ops: list[tuple[str, int, str | None]] = [
        (k, SET, v) for k, v in sorted(wanted.items()) if local.get(k) != v
    ]
    ops += [
        (k, DELETE, None)
        for k in sorted(local)
        if k not in wanted and k not in refused and not excluded(k, patterns)
    ]
    return ops
