"""The controller's request handling: validate against the current image, emit records, commit.

Requests are serialized (one lock), so validation sees every earlier change. Records of one request
are committed as one batch: a topic and all its partitions appear together or not at all.

Modules: ``controller_base`` (lock, image, commit), ``broker_registration`` (registration,
feature levels), ``topic_requests`` (create/delete topics, create partitions),
``config_requests`` (alter configs), ``producer_id_blocks``; ``validators`` and
``record_types`` hold what they share. ACLs, quotas, SCRAM, reassignment and mirrors have
their own modules.
"""

import logging

from .broker_registration import BrokerRegistrationMixin
from .config_requests import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    ConfigChange,
    ConfigRequestsMixin,
    ResourceResult,
)
from .controller_base import ControllerLock
from .producer_id_blocks import PRODUCER_ID_BLOCK, ProducerIdBlocksMixin
from .record_types import (
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from .topic_requests import MAX_PARTITIONS_PER_TOPIC, TopicRequestsMixin, TopicResult, TopicSpec
from .validators import ConfigSealer, ConfigValidationError, Validators

__all__ = [
    "APPEND",
    "DELETE",
    "MAX_PARTITIONS_PER_TOPIC",
    "PRODUCER_ID_BLOCK",
    "SET",
    "SUBTRACT",
    "ConfigChange",
    "ConfigRecord",
    "ConfigSealer",
    "ConfigValidationError",
    "Controller",
    "ControllerLock",
    "FeatureLevelRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RemoveTopicRecord",
    "ResourceResult",
    "TopicRecord",
    "TopicResult",
    "TopicSpec",
    "UnfenceBrokerRecord",
    "Validators",
]

log = logging.getLogger(__name__)


class Controller(
    BrokerRegistrationMixin, TopicRequestsMixin, ConfigRequestsMixin, ProducerIdBlocksMixin
):
    """The KRaft controller's request handling, composed of its parts (all share one lock)."""
