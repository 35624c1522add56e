"""Transaction coordinator settings (Kafka's broker config names in the comments)."""

from dataclasses import dataclass

TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    abort_check_interval_ms: int = 10_000
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    # transaction.remove.expired.transaction.cleanup.interval.ms
    id_expiration_check_interval_ms: int = 3_600_000
    # Ours: backoff between attempts to write a transaction's markers (doubling up to the max).
    marker_retry_backoff_ms: int = 50
    marker_retry_max_backoff_ms: int = 2_000
    # Ours: how long EndTxn waits for the markers after the decision is durable before it
    # answers anyway (Kafka answers at once; waiting saves the client's next AddPartitionsToTxn
    # a CONCURRENT_TRANSACTIONS round trip, and markers are local appends).
    end_txn_wait_ms: int = 2_000
