"""ApiVersions' features: the supported ranges, and the finalized levels read from the metadata
image (FeatureLevelRecords; level 0 is not finalized), with share.version raised to 1 by
group.share.enable=true, as a Kafka 4.1 cluster with share groups on reports."""

import asyncio
from types import SimpleNamespace
from typing import Any

from broker.api.api_versions import FEATURES, make_handler
from broker.controller.record_types import FeatureLevelRecord
from broker.metadata.image import MetadataImage, apply_records


def _image(**levels: int) -> MetadataImage:
    records = [
        (i, FeatureLevelRecord(name=n.replace("_", "."), feature_level=lvl))
        for i, (n, lvl) in enumerate(levels.items())
    ]
    return apply_records(MetadataImage(), records)[0]


def _answer(img: MetadataImage, floor: dict[str, int] | None = None) -> Any:
    handle = make_handler(lambda _listener: {18: (0, 4)}, lambda: img, floor)
    ctx = SimpleNamespace(api_version=3, listener="PLAINTEXT")
    return asyncio.run(handle(ctx, None))  # type: ignore[arg-type]


def _levels(resp: Any) -> dict[str, int]:
    return {f.name: f.max_version_level for f in resp.finalized_features}


def test_finalized_levels_come_from_the_image() -> None:
    img = _image(metadata_version=27, group_version=1)
    resp = _answer(img)
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    assert supported["share.version"] == (0, 1)
    assert supported["metadata.version"] == (7, 27)
    assert supported["group.version"] == FEATURES["group.version"][:2]
    assert _levels(resp) == {"metadata.version": 27, "group.version": 1}
    assert resp.finalized_features_epoch == img.offset == 1


def test_group_share_enable_raises_share_version_to_1() -> None:
    img = _image(metadata_version=27)
    assert _levels(_answer(img, {"share.version": 1}))["share.version"] == 1
    assert "share.version" not in _levels(_answer(img, {"share.version": 0}))


def test_level_zero_removes_a_feature() -> None:
    img = _image(metadata_version=27, share_version=1)
    assert _levels(_answer(img))["share.version"] == 1
    img = apply_records(img, [(5, FeatureLevelRecord(name="share.version", feature_level=0))])[0]
    assert "share.version" not in _levels(_answer(img))
