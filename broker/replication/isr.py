"""The leader's ISR bookkeeping: what the controller committed, what is pending, and the
AlterPartition request that carries a change (Kafka's ``PartitionState`` family in
``Partition.scala``: ``CommittedPartitionState``, ``PendingExpandIsr``, ``PendingShrinkIsr``).

At most one change is in flight. While it is, the *maximal* ISR (used for the high watermark and
acks=all) is the union of the committed ISR and the proposal: an expansion counts the new
member at once (a stricter HW, harmless if the controller refuses), a shrink keeps counting the
members it removes until the controller accepts (so a refused shrink never let the HW pass a
replica that is still in the ISR). The controller can thus pick either ISR and the HW is safe.
"""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """One partition of AlterPartition (56) v2+: the leader's proposal.

    ``new_isr`` pairs each member with the broker epoch the leader saw in its last Fetch
    (NewIsrWithEpochs; -1 when unknown, which the controller does not check). ``request_id``
    is local: it ties the response to the pending change that sent it.
    """

    request_id: int
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[tuple[int, int], ...]

    @property
    def isr(self) -> frozenset[int]:
        return frozenset(b for b, _ in self.new_isr)


@dataclass(frozen=True, slots=True)
class CommittedIsr:
    """The ISR as the controller last told us (metadata or an AlterPartition response)."""

    isr: frozenset[int]

    @property
    def maximal(self) -> frozenset[int]:
        return self.isr

    @property
    def in_flight(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class PendingIsrChange:
    """An AlterPartition in flight: ``committed`` still rules; ``request`` proposes a new ISR."""

    committed: frozenset[int]
    request: AlterPartitionRequest
    expanding: bool  # True: PendingExpandIsr, False: PendingShrinkIsr

    @property
    def isr(self) -> frozenset[int]:
        return self.committed

    @property
    def maximal(self) -> frozenset[int]:
        # expand: committed + the new member; shrink: the committed set, removed members included
        return self.committed | self.request.isr

    @property
    def in_flight(self) -> bool:
        return True


IsrState = CommittedIsr | PendingIsrChange
