"""A mirror's persistent topic selection: the patterns of ``--add`` and the topics removed from it.

KIP-1279's metadata manager polls the source "to detect new topics". Here a pattern given to
AddTopicsToMirror (any ``TopicName`` that is not a legal topic name) is kept with the mirror, and
every metadata refresh adds the source topics it matches that do not exist locally yet. A topic
removed from the mirror (RemoveTopicsFromMirror, or failed over because the source deleted it) is
remembered, so a pattern never brings it back; adding it again explicitly forgets that.
``--remove`` with the same pattern text drops the pattern.

Both lists live in the mirror's MIRROR-resource configs under internal keys (JSON lists; regexes
may contain commas), so they are committed with the mirror's other records, replayed from the
metadata log and deleted with the mirror. DescribeConfigs hides them and AlterConfigs cannot
touch them (see `mirror_config.is_internal`).
"""

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..metadata.image import MIRROR_RESOURCE
from .controller import ConfigRecord
from .mirror_config import INTERNAL_PREFIX

log = logging.getLogger(__name__)

INCLUDE_KEY: Final = INTERNAL_PREFIX + "topics.include"  # regexes, matched in full
REMOVED_KEY: Final = INTERNAL_PREFIX + "topics.removed"  # topic names


def _load(configs: Mapping[str, str], key: str) -> list[str]:
    raw = configs.get(key)
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        log.error("ignoring the unreadable mirror bookkeeping %s=%r", key, raw)
        return []
    return value


def include_patterns(configs: Mapping[str, str]) -> list[str]:
    """The mirror's stored patterns, in the order they were added."""
    return _load(configs, INCLUDE_KEY)


def removed_topics(configs: Mapping[str, str]) -> set[str]:
    return set(_load(configs, REMOVED_KEY))


def compiled(patterns: Iterable[str]) -> list[re.Pattern[str]]:
    """Patterns that compile (they were checked when stored; a bad one is skipped, not fatal)."""
    out: list[re.Pattern[str]] = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except re.error as e:
            log.error("ignoring the stored mirror topic pattern %r: %s", p, e)
    return out


def selection_records(
    mirror: str,
    configs: Mapping[str, str],
    *,
    add_patterns: Sequence[str] = (),
    drop_patterns: Sequence[str] = (),
    added: Iterable[str] = (),
    removed: Iterable[str] = (),
) -> list[Any]:
    """ConfigRecords updating ``mirror``'s patterns and removed topics (none if nothing changes)."""
    include = include_patterns(configs)
    new_include = [p for p in include if p not in drop_patterns]
    new_include += [p for p in dict.fromkeys(add_patterns) if p not in new_include]
    gone = removed_topics(configs)
    new_gone = (gone - set(added)) | set(removed)
    records: list[Any] = []
    for key, old, new in (
        (INCLUDE_KEY, include, new_include),
        (REMOVED_KEY, sorted(gone), sorted(new_gone)),
    ):
        if old != new:
            records.append(
                ConfigRecord(
                    resource_type=MIRROR_RESOURCE,
                    resource_name=mirror,
                    name=key,
                    value=json.dumps(new) if new else None,
                )
            )
    return records
