"""Replica lists of the ``*.replication.throttled.replicas`` topic configs (Kafka's
ThrottledReplicaListValidator grammar): ``*`` (every replica of the topic), or a comma-separated
list of ``partitionId:brokerId`` (blanks around items allowed), or empty (none).

For ``mirror.replication.throttled.replicas`` (KIP-1279) the broker id is the destination broker
that fetches the partition from the source; ``mirror.replication.throttled.rate`` applies to the
listed replicas only, as Kafka's replication throttles do.
"""

import functools
import re
from dataclasses import dataclass
from typing import Final

_ENTRY: Final = re.compile(r"([0-9]+):([0-9]+)")
EXPECTED: Final = "expected '*' or a comma-separated list of partitionId:brokerId"


class ThrottledReplicasError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    every: bool = False
    replicas: frozenset[tuple[int, int]] = frozenset()  # (partition, broker)

    def throttles(self, partition: int, broker: int) -> bool:
        return self.every or (partition, broker) in self.replicas

    def partitions_of(self, broker: int) -> frozenset[int]:
        return frozenset(p for p, b in self.replicas if b == broker)


NONE: Final = ThrottledReplicas()


@functools.lru_cache(maxsize=1024)
def parse_throttled_replicas(value: str) -> ThrottledReplicas:
    """Parse a config value; ThrottledReplicasError names the first bad entry."""
    text = value.strip()
    if not text:
        return NONE
    if text == "*":
        return ThrottledReplicas(every=True)
    replicas: set[tuple[int, int]] = set()
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        m = _ENTRY.fullmatch(entry)
        if m is None:
            if entry == "*":
                raise ThrottledReplicasError(f"'*' must be the only entry ({EXPECTED})")
            raise ThrottledReplicasError(f"'{entry}' is not partitionId:brokerId ({EXPECTED})")
        replicas.add((int(m.group(1)), int(m.group(2))))
    return ThrottledReplicas(replicas=frozenset(replicas))
