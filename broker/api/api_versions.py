"""ApiVersions v0-v4: the versions this node serves on the request's listener, derived from the
dispatcher's table (a controller listener lists the controller's APIs, a broker listener the
broker's: ``listener_apis.py``).

An unsupported ApiVersions version is answered by the dispatcher with a v0 response carrying
UNSUPPORTED_VERSION and the full list, as Kafka does, so the client can retry lower.
"""

from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from .context import RequestContext

API_KEY = 18
VERSIONS = (0, 4)

# Finalized features a Kafka 4.1 KRaft cluster reports (metadata.version 4.1-IV1 = 26 here).
FEATURES: dict[str, tuple[int, int, int]] = {  # name -> (min, max supported, finalized level)
    "metadata.version": (7, 26, 26),
    "kraft.version": (0, 1, 0),
    "group.version": (0, 1, 1),
    "transaction.version": (0, 2, 0),
    # KIP-932 share groups: finalized at 1 where ``group.share.enable=true`` (``levels``)
    "share.version": (0, 1, 0),
}


def make_handler(
    supported: Callable[[str], dict[int, tuple[int, int]]],
    features_epoch: Callable[[], int],
    levels: Mapping[str, int] | None = None,
) -> Any:
    """``supported(listener)``: the versions served there. ``levels``: finalized levels that
    differ from ``FEATURES``' (this node's config)."""
    finalized = {n: (levels or {}).get(n, lvl) for n, (_lo, _hi, lvl) in FEATURES.items()}

    async def handle(ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(API_KEY).response_type(ctx.api_version)
        return build(
            cls,
            {
                "error_code": ErrorCode.none,
                "api_keys": [
                    {"api_key": k, "min_version": lo, "max_version": hi}
                    for k, (lo, hi) in sorted(supported(ctx.listener).items())
                ],
                "throttle_time": 0,
                "supported_features": [
                    {"name": n, "min_version": lo, "max_version": hi}
                    for n, (lo, hi, _) in FEATURES.items()
                ],
                "finalized_features_epoch": features_epoch(),
                "finalized_features": [
                    {"name": n, "max_version_level": lvl, "min_version_level": lvl}
                    for n, lvl in finalized.items()
                ],
            },
        )

    return handle
