"""The transaction coordinator: transactional ids and their transactions in
``__transaction_state`` (Kafka's TransactionCoordinator / TransactionStateManager)."""

from broker.coordinator.txn.config import TRANSACTION_STATE_TOPIC, TxnConfig
from broker.coordinator.txn.coordinator import TransactionCoordinator
from broker.coordinator.txn.markers import LocalMarkerWriter, MarkerWriter
from broker.coordinator.txn.producer_ids import ProducerIdManager

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "LocalMarkerWriter",
    "MarkerWriter",
    "ProducerIdManager",
    "TransactionCoordinator",
    "TxnConfig",
]
