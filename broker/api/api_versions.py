"""ApiVersions v0-v4: the versions this node serves on the request's listener, derived from the
dispatcher's table (a controller listener lists the controller's APIs, a broker listener the
broker's: ``listener_apis.py``), and (v3+) the features: the levels this node supports and the
cluster's finalized levels, read from the metadata image (FeatureLevelRecords; Kafka's
DescribeFeatures is this response).

An unsupported ApiVersions version is answered by the dispatcher with a v0 response carrying
UNSUPPORTED_VERSION and the full list, as Kafka does, so the client can retry lower.
"""

from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..metadata.features import FEATURES
from ..metadata.image import MetadataImage
from .context import RequestContext

API_KEY = 18
VERSIONS = (0, 4)

__all__ = ["API_KEY", "FEATURES", "VERSIONS", "finalized_levels", "make_handler"]


def finalized_levels(img: MetadataImage, floor: Mapping[str, int] | None = None) -> dict[str, int]:
    """The finalized levels as clients see them: the image's (level 0 is not finalized), raised
    to ``floor`` (a node setting that turns a feature on by itself: group.share.enable)."""
    out = dict(img.features)
    for name, level in (floor or {}).items():
        if level > out.get(name, 0):
            out[name] = level
    return out


def make_handler(
    supported: Callable[[str], dict[int, tuple[int, int]]],
    image: Callable[[], MetadataImage],
    floor: Mapping[str, int] | None = None,
) -> Any:
    """``supported(listener)``: api key -> versions served there; ``image()``: the node's
    metadata image."""

    async def handle(ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(API_KEY).response_type(ctx.api_version)
        img = image()
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
                "finalized_features_epoch": img.offset,
                "finalized_features": [
                    {"name": n, "max_version_level": lvl, "min_version_level": lvl}
                    for n, lvl in sorted(finalized_levels(img, floor).items())
                ],
            },
        )

    return handle
