"""Names a mirror gives on the destination (active-active by prefix, beyond KIP-1279).

A mirror created with ``mirror.topic.prefix=east.`` stores source topic ``orders`` as
``east.orders`` here (byte for byte, same offsets, same topic id: only the name differs), and with
``mirror.group.prefix.enable=true`` source group ``g`` as ``east.g``. Both keys are fixed at
CreateMirror: changing them would rename every topic the mirror already made.

Loop prevention: every topic a mirror creates carries the topic config
``mirror.source.cluster.ids``, the cluster ids its records passed through, oldest first (the
source topic's own list, then the source's cluster id). A mirror never takes a source topic whose
list holds this cluster's id, so ``east`` and ``west`` can mirror each other with patterns that
would also match each other's mirror topics, and a longer ring (A -> B -> C -> A) stops too.

Pure functions only (no I/O): the controller, the API, the fetchers and metadata sync all call
these, so the mapping lives in one place.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

TOPIC_PREFIX_KEY: Final = "mirror.topic.prefix"
GROUP_PREFIX_ENABLE_KEY: Final = "mirror.group.prefix.enable"
# Mirror configs fixed at CreateMirror (AlterConfigs refuses a change).
IMMUTABLE_KEYS: Final = frozenset({TOPIC_PREFIX_KEY, GROUP_PREFIX_ENABLE_KEY})
# Topic config on mirror topics: the origin chain (comma-separated cluster ids, oldest first).
SOURCE_CLUSTER_IDS_CONFIG: Final = "mirror.source.cluster.ids"

MAX_TOPIC_NAME_LENGTH: Final = 249
_LEGAL: Final = re.compile(r"[a-zA-Z0-9._-]+")


@dataclass(frozen=True, slots=True)
class Naming:
    """How one mirror names source topics and groups here."""

    prefix: str = ""
    groups: bool = False  # the prefix applies to synced consumer groups too

    def local_topic(self, source: str) -> str:
        return self.prefix + source

    def source_topic(self, local: str) -> str:
        """The source name of a topic this mirror stores as ``local`` (the name itself when
        it lacks the prefix, e.g. a topic added before a failover of an unprefixed mirror)."""
        if self.prefix and local.startswith(self.prefix):
            return local[len(self.prefix) :]
        return local

    def local_group(self, source: str) -> str:
        return self.prefix + source if self.groups else source

    def source_group(self, local: str) -> str:
        if self.groups and self.prefix and local.startswith(self.prefix):
            return local[len(self.prefix) :]
        return local


def naming(mirror_configs: Mapping[str, str]) -> Naming:
    """A mirror's naming from its configs (an unprefixed mirror: names unchanged)."""
    prefix = (mirror_configs.get(TOPIC_PREFIX_KEY) or "").strip()
    groups = (mirror_configs.get(GROUP_PREFIX_ENABLE_KEY) or "").strip().lower() == "true"
    return Naming(prefix, groups and bool(prefix))


def config_error(key: str, value: str) -> str | None:
    """Why a value of a naming key is not acceptable, or None."""
    if key == TOPIC_PREFIX_KEY:
        v = value.strip()
        if v and not _LEGAL.fullmatch(v):
            return (
                f"Invalid value {value} for configuration {key}: a topic name prefix may hold "
                "only ASCII alphanumerics, '.', '_' and '-'"
            )
        if len(v) >= MAX_TOPIC_NAME_LENGTH:
            return (
                f"Invalid value {value} for configuration {key}: longer than "
                f"{MAX_TOPIC_NAME_LENGTH - 1} characters, no topic name would fit"
            )
    elif key == GROUP_PREFIX_ENABLE_KEY and value.strip().lower() not in ("true", "false"):
        return f"Invalid value {value} for configuration {key}: expected true or false"
    return None


def change_error(mirror: str, key: str, old: str | None, new: str | None) -> str | None:
    """Why AlterConfigs may not change ``key`` of ``mirror`` from ``old`` to ``new``."""
    if key not in IMMUTABLE_KEYS or (old or "").strip() == (new or "").strip():
        return None
    return (
        f"Mirror config {key} of mirror {mirror} is set when the mirror is created and cannot "
        f"be changed (it names the topics and groups the mirror made here); it is "
        f"{(old or '').strip() or '(unset)'}. Delete the mirror and create it again to change it."
    )


def local_name_error(mirror: str, source: str, local: str) -> str | None:
    """Why ``local`` (``source`` renamed by ``mirror``'s prefix) cannot name a topic here."""
    if len(local) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Mirror {mirror} would store source topic {source} as {local}, longer than "
            f"{MAX_TOPIC_NAME_LENGTH} characters."
        )
    if not _LEGAL.fullmatch(local) or local in (".", ".."):
        return f"Mirror {mirror} would store source topic {source} as {local}, not a legal name."
    return None


def _collision_key(name: str) -> str:
    """Kafka treats names equal up to '.' vs '_' as colliding (their metric names clash)."""
    return name.replace(".", "_")


def collisions(mirror: str, mapping: Mapping[str, str]) -> dict[str, str]:
    """Source topics (``mapping``: source -> local) whose local names clash with another's
    (equal, or equal up to '.' vs '_'): source name -> why, naming the mirror and both topics."""
    by_key: dict[str, list[str]] = {}
    for src, local in mapping.items():
        by_key.setdefault(_collision_key(local), []).append(src)
    out: dict[str, str] = {}
    for sources in by_key.values():
        if len(sources) < 2:
            continue
        for src in sources:
            others = ", ".join(s for s in sorted(sources) if s != src)
            out[src] = (
                f"Mirror {mirror} would store source topics {src} and {others} under one name "
                f"({mapping[src]}): rename one of them at the source or use another prefix."
            )
    return out


def clashing_local(local: str, existing: Iterable[str]) -> str | None:
    """An existing topic here that ``local`` equals or collides with ('.' vs '_'), or None."""
    key = _collision_key(local)
    for name in existing:
        if name == local or _collision_key(name) == key:
            return name
    return None


def origin_chain(value: str | None) -> list[str]:
    """The cluster ids a topic's records came through (topic config value), oldest first."""
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def chain_value(source_chain: str | None, source_cluster_id: str | None) -> str | None:
    """The ``mirror.source.cluster.ids`` of a mirror topic made from a source topic whose own
    value is ``source_chain``, mirrored from cluster ``source_cluster_id`` (None when neither
    is known: an old source reporting no cluster id)."""
    chain = origin_chain(source_chain)
    if source_cluster_id and (not chain or chain[-1] != source_cluster_id):
        chain.append(source_cluster_id)
    return ",".join(chain) or None


def loops_back(source_topic_configs: Mapping[str, str], own_cluster_id: str) -> bool:
    """A source topic that is itself (through any chain) a mirror of this cluster."""
    return bool(own_cluster_id) and own_cluster_id in origin_chain(
        source_topic_configs.get(SOURCE_CLUSTER_IDS_CONFIG)
    )


def loop_message(mirror: str, source: str, own_cluster_id: str) -> str:
    return (
        f"Source topic {source} of mirror {mirror} is itself a mirror of this cluster "
        f"({own_cluster_id} is in its {SOURCE_CLUSTER_IDS_CONFIG}); mirroring it back would "
        "make a loop."
    )


_TOPIC, _GROUP = 2, 3  # ACL resource types (Kafka's wire codes)
_LITERAL, _PREFIXED = 3, 4  # ACL pattern types


def acl_resource(naming: Naming, resource_type: int, name: str, pattern: int) -> tuple[str, int]:
    """A source ACL's (resource name, pattern type) here: topic resources follow the topic
    prefix (a LITERAL ``*`` becomes PREFIXED ``<prefix>``: every topic this mirror makes, and
    nothing of this cluster's own), group resources the group prefix when it is enabled."""
    renamed = naming.prefix and (
        resource_type == _TOPIC or (resource_type == _GROUP and naming.groups)
    )
    if not renamed or pattern not in (_LITERAL, _PREFIXED):
        return name, pattern
    if pattern == _LITERAL and name == "*":
        return naming.prefix, _PREFIXED
    return naming.prefix + name, pattern
