"""CreateTopics and CreatePartitions refuse what would take a node past its descriptor budget.

A partition replica costs its node one file descriptor at rest (the active segment's log
file, see ``broker.log.file_cache``), so the number of replicas a node can host is bounded by
its open-file limit (less a reserve for connections and the cache of ``log.max.open.files``).
Past it, the node would fail to open logs (EMFILE) after the metadata is committed; the
controller refuses such a topic or partition increase up front instead, whole, with
POLICY_VIOLATION naming the limit. The budget is the controller's own (nodes are assumed to
run with the same limit and config).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.metadata.image import MetadataImage


@dataclass(frozen=True, slots=True)
class ReplicaBudget:
    """At most ``replicas_per_node`` partition replicas per node; ``why`` explains the bound."""

    replicas_per_node: int
    why: str


class BudgetCheck:
    """Replica counts per node for one request: the image's, plus what the request's earlier
    topics were admitted with."""

    def __init__(self, budget: ReplicaBudget | None, img: MetadataImage) -> None:
        self._budget = budget
        self._counts: Counter[int] = Counter()
        if budget is not None:
            for topic in img.topics.values():
                for p in topic.partitions.values():
                    self._counts.update(p.replicas)

    def admit(self, records: Iterable[Any]) -> tuple[ErrorCode, str] | None:
        """None (and the replicas counted) when ``records``' PartitionRecords fit every
        node's budget; else POLICY_VIOLATION and a message naming the limit."""
        budget = self._budget
        if budget is None:
            return None
        new: Counter[int] = Counter()
        for rec in records:
            replicas = getattr(rec, "replicas", None)
            if replicas is not None and hasattr(rec, "partition_id"):
                new.update(replicas)
        limit = budget.replicas_per_node
        over = sorted(n for n, c in new.items() if self._counts[n] + c > limit)
        if over:
            node = over[0]
            return ErrorCode.policy_violation, (
                f"Refused: {new[node]} more partition replica(s) would give node {node} "
                f"{self._counts[node] + new[node]} (it hosts {self._counts[node]}), over its "
                f"file descriptor budget of {limit} partitions ({budget.why}); raise the "
                f"open-file limit or create fewer partitions"
            )
        self._counts.update(new)
        return None
