"""Topic naming rules and replica placement, as Kafka applies them."""

import re
from collections.abc import Sequence
from typing import Final

MAX_NAME_LENGTH: Final = 249
_LEGAL: Final = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str) -> str | None:
    """Why a topic name is invalid, or None (Kafka's Topic.validate)."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def assign_replicas(
    brokers: Sequence[int], partitions: range, replication_factor: int, start: int
) -> dict[int, list[int]]:
    """Round-robin placement starting at ``start`` (rack-unaware, like Kafka's simple assignor)."""
    ids = sorted(brokers)
    n = len(ids)
    return {p: [ids[(start + p + r) % n] for r in range(replication_factor)] for p in partitions}
