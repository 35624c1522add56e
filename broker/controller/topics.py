"""Topic naming rules and replica placement, as Kafka applies them."""

import re
from collections.abc import Mapping, Sequence
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
    brokers: Sequence[int],
    partitions: range,
    replication_factor: int,
    start: int,
    racks: Mapping[int, str | None] | None = None,
) -> dict[int, list[int]]:
    """Round-robin placement starting at ``start``, like Kafka's assignor. When every broker has
    a rack, the brokers are taken alternating by rack (rack A's first, rack B's first, ...,
    rack A's second...), so consecutive leaders sit in different racks, and a partition's other
    replicas go to racks it does not use yet while there are any (Kafka's rack-aware rule)."""
    racks = racks or {}
    ids = sorted(brokers)
    if not ids or any(racks.get(b) is None for b in ids):
        n = len(ids)
        return {
            p: [ids[(start + p + r) % n] for r in range(replication_factor)] for p in partitions
        }
    by_rack: dict[str, list[int]] = {}
    for b in ids:
        by_rack.setdefault(str(racks[b]), []).append(b)
    order = [by_rack[r] for r in sorted(by_rack)]
    alternated = [
        rack[i] for i in range(max(len(r) for r in order)) for rack in order if i < len(rack)
    ]
    n, n_racks = len(alternated), len(order)
    out: dict[int, list[int]] = {}
    for p in partitions:
        first = (start + p) % n
        chosen = [alternated[first]]
        used = {racks[alternated[first]]}
        k = 1
        while len(chosen) < replication_factor and k < 2 * n:
            b = alternated[(first + k) % n]
            k += 1
            if b in chosen or (racks[b] in used and len(used) < n_racks):
                continue
            chosen.append(b)
            used.add(racks[b])
        out[p] = chosen
    return out
