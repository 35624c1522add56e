"""UpdateFeatures in the controller (Kafka's FeatureControlManager): check each requested level
against the written state, then commit one FeatureLevelRecord per feature as one batch.

The rules and messages are Kafka 4.1's. For each update, in order: a known upgrade type (1
upgrade, 2 safe downgrade, 3 unsafe downgrade); a level of 0 or more; a level this controller and
every registered broker supports (their RegisterBrokerRecord ranges: "Local controller 1 only
supports versions 0-1", "Broker 2 does not support this feature."); a lower level only as a
downgrade and a higher one only as an upgrade. metadata.version then may not go below 3.3-IV3
nor downgrade across a level whose metadata changed; any other feature must find the levels it
depends on among the finalized levels with this request's applied. The first failing update
fails the whole request (nothing is written), its message wrapped as Kafka's QuorumController
does. Level 0 removes the feature from the finalized set.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..metadata.features import (
    DEPENDENCIES,
    FEATURES,
    METADATA_VERSION,
    MINIMUM_MV,
    metadata_changed_between,
    mv_name,
)
from ..metadata.image import MetadataImage
from .record_types import FeatureLevelRecord

log = logging.getLogger(__name__)

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

# name -> (min, max) levels this controller supports
LOCAL_SUPPORT: dict[str, tuple[int, int]] = {n: (lo, hi) for n, (lo, hi, _) in FEATURES.items()}


class ControllerCore(Protocol):
    @property
    def lock(self) -> contextlib.AbstractAsyncContextManager[None]: ...

    def current_image(self) -> MetadataImage: ...

    async def commit(self, records: Sequence[Any]) -> int: ...


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int = UPGRADE


class UpdateRefused(Exception):
    """INVALID_UPDATE_VERSION with Kafka's message."""


def _range_text(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _not_supported(level: int, what: str, rng: tuple[int, int]) -> str | None:
    lo, hi = rng
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {_range_text(lo, hi)}"


def _invalid(name: str, level: int, why: str) -> UpdateRefused:
    return UpdateRefused(f"Invalid update version {level} for feature {name}. {why}")


def _invalid_mv(level: int, why: str) -> UpdateRefused:
    return UpdateRefused(f"Invalid metadata.version {level}. {why}")


def plan(
    img: MetadataImage,
    updates: Sequence[FeatureUpdate],
    node_id: int,
    local: Mapping[str, tuple[int, int]] = LOCAL_SUPPORT,
) -> list[Any]:
    """The records for ``updates`` against ``img``; raises UpdateRefused."""
    finalized = dict(img.features)
    proposed = {**finalized, **{u.name: u.level for u in updates}}
    records: list[Any] = []
    for u in updates:
        records.append(_check(img, finalized, proposed, u, node_id, local))
    return records


def _check(
    img: MetadataImage,
    finalized: Mapping[str, int],
    proposed: Mapping[str, int],
    u: FeatureUpdate,
    node_id: int,
    local: Mapping[str, tuple[int, int]],
) -> Any:
    name, level = u.name, u.level
    if u.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise _invalid(name, level, "The controller does not support the given upgrade type.")
    current = finalized.get(name, 0)
    if level < 0:
        raise _invalid(name, level, "A feature version cannot be less than 0.")
    why = _not_supported(level, f"Local controller {node_id}", local.get(name, (0, 0)))
    for b in sorted(img.brokers.values(), key=lambda b: b.broker_id):
        if why is not None:
            break
        ranges = {f: (lo, hi) for f, lo, hi in b.features}
        why = _not_supported(level, f"Broker {b.broker_id}", ranges.get(name, (0, 0)))
    if why is not None:
        raise _invalid(name, level, why)
    if level < current and u.upgrade_type == UPGRADE:
        raise _invalid(
            name,
            level,
            "Can't downgrade the version of this feature without setting the upgrade type to "
            "either safe or unsafe downgrade.",
        )
    if level > current and u.upgrade_type != UPGRADE:
        raise _invalid(name, level, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        if level < MINIMUM_MV:
            raise _invalid_mv(
                level, f"Unable to set a metadata.version less than {mv_name(MINIMUM_MV)}"
            )
        if level < current and metadata_changed_between(level, current):
            if u.upgrade_type == UNSAFE_DOWNGRADE:
                raise _invalid_mv(
                    level, "Unsafe metadata downgrade is not supported in this version."
                )
            raise _invalid_mv(
                level,
                "Refusing to perform the requested downgrade because it might delete metadata "
                "information.",
            )
    else:
        mv = proposed.get(METADATA_VERSION)
        if level >= 1 and (mv is None or mv < MINIMUM_MV):
            raise _invalid(
                name,
                level,
                f"{name} could not be set to {level} because it depends on metadata.version="
                f"{MINIMUM_MV} ({mv_name(MINIMUM_MV)})",
            )
        for dep, needed in sorted(DEPENDENCIES.get((name, level), {}).items()):
            have = proposed.get(dep)
            if have is None or have < needed:
                raise _invalid(
                    name,
                    level,
                    f"{name} could not be set to {level} because it depends on {dep} level "
                    f"{needed}",
                )
    return FeatureLevelRecord(name=name, feature_level=level)


class FeatureControl:
    def __init__(self, core: ControllerCore, node_id: int) -> None:
        self._core = core
        self._node_id = node_id

    async def update(self, updates: Sequence[FeatureUpdate], validate_only: bool) -> None:
        """Check and (unless ``validate_only``) commit; raises UpdateRefused."""
        async with self._core.lock:
            try:
                records = plan(self._core.current_image(), updates, self._node_id)
            except UpdateRefused as e:
                log.warning("%s", e)
                raise
            if validate_only or not records:
                return
            await self._core.commit(records)
            for u in updates:
                log.info("feature %s finalized at level %d", u.name, u.level)
