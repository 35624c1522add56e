"""ApiVersions' features: share.version is supported up to 1 and finalized at this node's level
(1 with group.share.enable=true, as a Kafka 4.1 cluster with share groups on reports)."""

import asyncio
from types import SimpleNamespace
from typing import Any

from broker.api.api_versions import FEATURES, make_handler


def _answer(levels: dict[str, int] | None) -> Any:
    handle = make_handler(lambda _listener: {18: (0, 4)}, lambda: 7, levels)
    return asyncio.run(handle(SimpleNamespace(api_version=3, listener="PLAINTEXT"), None))  # type: ignore[arg-type]


def test_share_version_is_finalized_at_the_configured_level() -> None:
    off, on = _answer(None), _answer({"share.version": 1})
    supported = {f.name: (f.min_version, f.max_version) for f in on.supported_features}
    assert supported["share.version"] == (0, 1)
    assert supported["group.version"] == FEATURES["group.version"][:2]
    levels_off = {f.name: f.max_version_level for f in off.finalized_features}
    levels_on = {f.name: f.max_version_level for f in on.finalized_features}
    assert levels_off["share.version"] == 0 and levels_on["share.version"] == 1
    assert levels_on["group.version"] == 1 and on.finalized_features_epoch == 7
