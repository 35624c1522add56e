"""`NodeParts`: every bundle a built node is made of, in construction order; what start-up,
shutdown and the metrics endpoint work on."""

from __future__ import annotations

from dataclasses import dataclass

from .api_handlers import Apis
from .controller_parts import ControllerParts
from .coordinators import Coordinators
from .metadata_quorum import QuorumParts
from .mirroring import Mirroring
from .replication import Replication
from .request_services import RequestServices
from .storage import Storage


@dataclass(frozen=True, slots=True)
class NodeParts:
    storage: Storage
    quorum: QuorumParts
    replication: Replication
    controller: ControllerParts
    coordinators: Coordinators
    services: RequestServices
    apis: Apis
    mirroring: Mirroring
