"""The collaborators the stepper (`partition_steps`) and the scheduler (`reconcile_scheduling`)
share, built once by `MirrorManager` and handed to both as one value."""

from collections.abc import Callable
from dataclasses import dataclass

from ..metadata.image import MetadataImage
from .failover import Failover
from .fetcher_control import FetcherControl
from .manager_interfaces import Replicas, StateStore
from .partition_book import PartitionBook


@dataclass(frozen=True, slots=True)
class PartitionParts:
    image: Callable[[], MetadataImage]
    replicas: Replicas
    states: StateStore
    book: PartitionBook
    fetcher: FetcherControl
    failover: Failover
