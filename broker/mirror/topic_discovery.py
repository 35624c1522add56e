"""New source topics for a mirror's stored patterns (KIP-1279: the metadata manager polls the
source "to detect new topics" and creates those missing at the destination).

Called by each metadata refresh of a mirror that has patterns (`controller.mirror_patterns`): the
source topics matching a pattern in full, minus internal ones (``__*`` or flagged internal), those
removed from the mirror and any name that exists here already (a local topic is never taken over
by a pattern), are created as ``--add`` creates them (the source's topic id, partition count and
non-excluded configs) and put in the mirror, in one controller batch.
"""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..controller import mirror_patterns
from ..controller.controller import TopicSpec
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
    ) -> Any: ...


@dataclass(slots=True)
class Discovered:
    added: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # topic -> why
    configs_skipped: bool = False  # the source cannot describe configs: created with defaults


def candidates(img: MetadataImage, mirror: str, source_topics: Mapping[str, Any]) -> list[str]:
    """Source topics a stored pattern of ``mirror`` selects that should be created here."""
    mcfg = img.config(MIRROR_RESOURCE, mirror)
    patterns = mirror_patterns.compiled(mirror_patterns.include_patterns(mcfg))
    if not patterns:
        return []
    removed = mirror_patterns.removed_topics(mcfg)
    return sorted(
        name
        for name, t in source_topics.items()
        if not name.startswith("__")
        and not getattr(t, "is_internal", False)
        and name not in removed
        and name not in img.topics
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
) -> Discovered:
    """Create and mirror the new matching source topics; ``call`` bounds each source request.
    Source failures propagate (the caller counts them); per-topic refusals are returned."""
    out = Discovered()
    if not mirror_patterns.include_patterns(img.config(MIRROR_RESOURCE, mirror)):
        return out
    found: Mapping[str, Any] = await call(source.topics(None))
    names = candidates(img, mirror, found)
    if not names:
        return out
    configs: Mapping[str, Mapping[str, str]] = {}
    if can_describe_configs:
        configs = await call(source.topic_configs(names))
    else:
        out.configs_skipped = True
    specs = {
        n: TopicSpec(
            n,
            num_partitions=max(len(found[n].partitions), 1),
            configs=dict(adder.sanitize_topic_configs(mirror, configs.get(n, {}))),
            topic_id=found[n].topic_id,
        )
        for n in names
    }
    result = await adder.add_topics(mirror, names, specs, create_only=True)
    if int(result.error) != 0:
        out.failed = {n: str(result.message or result.error) for n in names}
        return out
    for r in result.topics:
        if int(r.error) == 0:
            out.added.append(r.name)
        else:
            out.failed[r.name] = str(r.message or r.error)
    return out
