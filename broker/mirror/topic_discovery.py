"""New source topics for a mirror's stored patterns (KIP-1279: the metadata manager polls the
source "to detect new topics" and creates those missing at the destination).

Called by each metadata refresh of a mirror that has patterns (`controller.mirror_patterns`): the
source topics matching a pattern in full, minus internal ones (``__*`` or flagged internal), those
removed from the mirror and any name that exists here already (a local topic is never taken over
by a pattern), are created as ``--add`` creates them (the source's topic id, partition count and
non-excluded configs) and put in the mirror, in one controller batch. With a
``mirror.topic.prefix`` the patterns match source names and the topics are made under the
prefixed name; a source topic that is itself a mirror of this cluster is skipped
(`broker.metadata.mirror_names`).
"""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..controller import mirror_patterns
from ..controller.controller import TopicSpec
from ..controller.mirror_config import SOURCE_CLUSTER_ID_KEY
from ..metadata import mirror_names
from ..metadata.image import MIRROR_RESOURCE, MetadataImage


class Source(Protocol):
    async def topics(self, names: Sequence[str] | None = None) -> Mapping[str, Any]: ...
    async def topic_configs(self, names: Sequence[str]) -> Mapping[str, Mapping[str, str]]: ...


class Adder(Protocol):
    """What discovery needs of `controller.mirrors.MirrorController`."""

    def sanitize_topic_configs(self, mirror: str, configs: Mapping[str, str]) -> dict[str, str]: ...
    async def add_topics(
        self,
        mirror: str,
        names: Sequence[str],
        new_topics: Mapping[str, TopicSpec] | None = None,
        *,
        patterns: Sequence[str] = (),
        create_only: bool = False,
        origins: Mapping[str, str] | None = None,
    ) -> Any: ...


@dataclass(slots=True)
class Discovered:
    added: list[str] = field(default_factory=list)  # local names
    failed: dict[str, str] = field(default_factory=dict)  # topic -> why
    looped: list[str] = field(default_factory=list)  # source topics that mirror this cluster
    configs_skipped: bool = False  # the source cannot describe configs: created with defaults


def candidates(img: MetadataImage, mirror: str, source_topics: Mapping[str, Any]) -> list[str]:
    """Source topics a stored pattern of ``mirror`` selects that should be created here
    (source names; patterns match source names, the local name is the prefixed one)."""
    mcfg = img.config(MIRROR_RESOURCE, mirror)
    patterns = mirror_patterns.compiled(mirror_patterns.include_patterns(mcfg))
    if not patterns:
        return []
    names = mirror_names.naming(mcfg)
    removed = mirror_patterns.removed_topics(mcfg)
    return sorted(
        name
        for name, t in source_topics.items()
        if not name.startswith("__")
        and not getattr(t, "is_internal", False)
        and names.local_topic(name) not in removed
        and names.local_topic(name) not in img.topics
        and any(p.fullmatch(name) for p in patterns)
    )


async def discover(
    mirror: str,
    img: MetadataImage,
    source: Source,
    adder: Adder,
    *,
    can_describe_configs: bool,
    call: Callable[[Awaitable[Any]], Awaitable[Any]],
    own_cluster_id: str = "",
) -> Discovered:
    """Create and mirror the new matching source topics; ``call`` bounds each source request.
    Source failures propagate (the caller counts them); per-topic refusals are returned. A
    source topic that is itself a mirror of this cluster (``own_cluster_id`` in its origin
    chain) is never taken (`mirror_names.loops_back`)."""
    out = Discovered()
    mcfg = img.config(MIRROR_RESOURCE, mirror)
    if not mirror_patterns.include_patterns(mcfg):
        return out
    found: Mapping[str, Any] = await call(source.topics(None))
    sources = candidates(img, mirror, found)
    if not sources:
        return out
    configs: Mapping[str, Mapping[str, str]] = {}
    if can_describe_configs:
        configs = await call(source.topic_configs(sources))
    else:
        out.configs_skipped = True
    out.looped = [n for n in sources if mirror_names.loops_back(configs.get(n, {}), own_cluster_id)]
    naming = mirror_names.naming(mcfg)
    local = {n: naming.local_topic(n) for n in sources if n not in out.looped}
    refused = mirror_names.collisions(mirror, local)
    for n, name in local.items():
        why = refused.get(n) or mirror_names.local_name_error(mirror, n, name)
        clash = mirror_names.clashing_local(name, img.topics)
        if why is None and clash is not None:
            why = (
                f"Mirror {mirror} would store source topic {n} as {name}, which collides with "
                f"topic {clash} here."
            )
        if why is not None:
            out.failed[name] = why
    wanted = {n: name for n, name in local.items() if name not in out.failed}
    if not wanted:
        return out
    source_cid = mcfg.get(SOURCE_CLUSTER_ID_KEY)
    specs = {
        name: TopicSpec(
            name,
            num_partitions=max(len(found[n].partitions), 1),
            configs=dict(adder.sanitize_topic_configs(mirror, configs.get(n, {}))),
            topic_id=found[n].topic_id,
        )
        for n, name in wanted.items()
    }
    origins = {
        name: chain
        for n, name in wanted.items()
        if (
            chain := mirror_names.chain_value(
                configs.get(n, {}).get(mirror_names.SOURCE_CLUSTER_IDS_CONFIG), source_cid
            )
        )
    }
    names = list(wanted.values())
    result = await adder.add_topics(mirror, names, specs, create_only=True, origins=origins)
    if int(result.error) != 0:
        out.failed.update({n: str(result.message or result.error) for n in names})
        return out
    for r in result.topics:
        if int(r.error) == 0:
            out.added.append(r.name)
        else:
            out.failed[r.name] = str(r.message or r.error)
    return out
