"""What the controller checks configs with: the composition root's validators, the secrets
sealer, and the error a refused config value raises."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from ..config.group_configs import GroupConfigDefaults
from .fd_budget import ReplicaBudget

# mirror.name is internal (KIP-1279): only the mirror RPCs set or clear it.
_MIRROR_NAME_ONLY: Final = "mirror.name can only be set through the mirror APIs (kafka-mirrors.sh)"
_ORIGIN_ONLY: Final = (
    "mirror.source.cluster.ids is set by the mirror that creates the topic (its origin chain)"
)


class ConfigValidationError(Exception):
    pass


class ConfigSealer(Protocol):
    def seal(self, resource_type: int, name: str, key: str, value: str) -> str:
        """The value a ConfigRecord stores for ``key=value``; may raise ConfigValidationError."""
        ...

    def is_stale(self, resource_type: int, name: str, key: str) -> bool:
        """Is the stored value not encoded as it would be now (plain text, or the old secret)?
        Then the next AlterConfigs of its resource rewrites it, even with the same value."""
        ...


@dataclass(slots=True)
class Validators:
    """Config knowledge the controller needs, supplied by the composition root."""

    # (key, value) -> normalized value; raises ConfigValidationError naming the problem
    topic_config: Callable[[str, str], str]
    # (key, value) -> normalized value for a dynamically alterable broker key
    broker_config: Callable[[str, str], str]
    # list-type topic keys (APPEND/SUBTRACT work on them)
    list_keys: frozenset[str] = frozenset()
    default_partitions: int = 1
    default_replication_factor: int = 1
    # secrets at rest (config_secrets.ConfigSecrets); None: values stored as given
    secrets: "ConfigSealer | None" = None
    # the partition replicas one node's open-file limit allows (fd_budget); None: no bound
    replica_budget: ReplicaBudget | None = None
    # the broker's group config defaults and bounds (GROUP resources); None: Kafka's defaults
    group_defaults: GroupConfigDefaults | None = None
