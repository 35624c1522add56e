"""UpdateFeatures in the controller (broker.controller.features): Kafka 4.1's checks and
messages against the written state, and the records of an accepted update."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from broker.controller.features import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureControl,
    FeatureUpdate,
    UpdateRefused,
    plan,
)
from broker.controller.record_types import FeatureLevelRecord, RegisterBrokerRecord
from broker.metadata.image import MetadataImage, apply_records

ALL = (("metadata.version", 7, 27), ("group.version", 0, 1), ("share.version", 0, 1))


def _image(levels: dict[str, int], brokers: dict[int, Sequence[tuple[str, int, int]]]) -> Any:
    import sys

    mod = sys.modules[RegisterBrokerRecord.__module__]
    records: list[Any] = [FeatureLevelRecord(name=n, feature_level=v) for n, v in levels.items()]
    for b, feats in brokers.items():
        records.append(
            RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=None,
                broker_epoch=b,
                end_points=(),
                features=tuple(
                    mod.BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                    for n, lo, hi in feats
                ),
                rack=None,
                fenced=False,
            )
        )
    return apply_records(MetadataImage(), list(enumerate(records)))[0]


BASE = {"metadata.version": 27, "group.version": 1}


def _refused(img: Any, *updates: FeatureUpdate) -> str:
    with pytest.raises(UpdateRefused) as e:
        plan(img, updates, node_id=1)
    return str(e.value)


def test_upgrade_writes_one_record_per_feature() -> None:
    img = _image(BASE, {1: ALL, 2: ALL})
    records = plan(img, [FeatureUpdate("share.version", 1)], node_id=1)
    assert [(r.name, r.feature_level) for r in records] == [("share.version", 1)]


def test_level_not_supported_locally_or_by_a_broker() -> None:
    img = _image(BASE, {1: ALL, 2: ALL[:2]})
    assert _refused(img, FeatureUpdate("transaction.version", 2)) == (
        "Invalid update version 2 for feature transaction.version. "
        "Local controller 1 only supports versions 0-1"
    )
    assert _refused(img, FeatureUpdate("share.version", 1)) == (
        "Invalid update version 1 for feature share.version. "
        "Broker 2 does not support this feature."
    )
    assert _refused(img, FeatureUpdate("no.such.feature", 1)) == (
        "Invalid update version 1 for feature no.such.feature. "
        "Local controller 1 does not support this feature."
    )
    assert _refused(img, FeatureUpdate("metadata.version", 28)) == (
        "Invalid update version 28 for feature metadata.version. "
        "Local controller 1 only supports versions 7-27"
    )


def test_direction_must_match_the_upgrade_type() -> None:
    img = _image(BASE, {1: ALL})
    assert _refused(img, FeatureUpdate("group.version", 0, UPGRADE)).endswith(
        "Can't downgrade the version of this feature without setting the upgrade type to "
        "either safe or unsafe downgrade."
    )
    assert _refused(img, FeatureUpdate("share.version", 1, SAFE_DOWNGRADE)).endswith(
        "Can't downgrade to a newer version."
    )
    assert _refused(img, FeatureUpdate("share.version", -1)).endswith(
        "A feature version cannot be less than 0."
    )
    assert _refused(img, FeatureUpdate("share.version", 1, 7)).endswith(
        "The controller does not support the given upgrade type."
    )
    # a downgrade to 0 removes the feature
    (r,) = plan(img, [FeatureUpdate("group.version", 0, SAFE_DOWNGRADE)], node_id=1)
    assert (r.name, r.feature_level) == ("group.version", 0)


def test_dependencies_use_the_levels_of_the_same_request() -> None:
    img = _image({"metadata.version": 26, "group.version": 1}, {1: ALL})
    assert _refused(img, FeatureUpdate("share.version", 1)) == (
        "Invalid update version 1 for feature share.version. share.version could not be set "
        "to 1 because it depends on metadata.version level 27"
    )
    records = plan(
        img, [FeatureUpdate("metadata.version", 27), FeatureUpdate("share.version", 1)], 1
    )
    assert [(r.name, r.feature_level) for r in records] == [
        ("metadata.version", 27),
        ("share.version", 1),
    ]


def test_metadata_version_downgrades() -> None:
    img = _image(BASE, {1: ALL})
    # 27 -> 24: no level in between changed metadata (Kafka's didMetadataChange)
    (r,) = plan(img, [FeatureUpdate("metadata.version", 24, SAFE_DOWNGRADE)], node_id=1)
    assert r.feature_level == 24
    assert _refused(img, FeatureUpdate("metadata.version", 22, SAFE_DOWNGRADE)) == (
        "Invalid metadata.version 22. Refusing to perform the requested downgrade because it "
        "might delete metadata information."
    )
    assert _refused(img, FeatureUpdate("metadata.version", 22, UNSAFE_DOWNGRADE)) == (
        "Invalid metadata.version 22. Unsafe metadata downgrade is not supported in this version."
    )


class _Core:
    def __init__(self, img: Any) -> None:
        self.img = img
        self.commits: list[list[Any]] = []

    @property
    def lock(self) -> contextlib.AbstractAsyncContextManager[None]:
        @contextlib.asynccontextmanager
        async def held() -> AsyncIterator[None]:
            yield

        return held()

    def current_image(self) -> Any:
        return self.img

    async def commit(self, records: Sequence[Any]) -> int:
        self.commits.append(list(records))
        pairs = [(self.img.offset + 1 + i, r) for i, r in enumerate(records)]
        self.img = apply_records(self.img, pairs)[0]
        return self.img.offset


def test_control_commits_unless_validate_only_or_refused() -> None:
    core = _Core(_image(BASE, {1: ALL}))
    control = FeatureControl(core, node_id=1)
    asyncio.run(control.update([FeatureUpdate("share.version", 1)], validate_only=True))
    assert core.commits == []
    asyncio.run(control.update([FeatureUpdate("share.version", 1)], validate_only=False))
    assert core.img.features["share.version"] == 1
    with pytest.raises(UpdateRefused):
        asyncio.run(
            control.update(
                [FeatureUpdate("group.version", 0, SAFE_DOWNGRADE), FeatureUpdate("x", 1)], False
            )
        )
    assert len(core.commits) == 1 and core.img.features["group.version"] == 1
