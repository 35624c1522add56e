"""``kmirror_metadata_image_info``: which metadata this node holds, for comparing nodes.

An info metric (value 1) labelled with the image's digest (``broker.metadata.snapshot.
image_digest``: its content, whatever the offset or dict order), and
``kmirror_metadata_image_offset``, the metadata offset the image was applied to (a value, not a
label: a label would start a new series at every metadata change). Two nodes that have applied
the same records show the same digest; after a snapshot load too.
"""

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

IMAGE_INFO = "kmirror_metadata_image_info"
IMAGE_OFFSET = "kmirror_metadata_image_offset"

# (digest, offset) of the node's metadata image, or None when it cannot be read now
ImageInfo = tuple[str, int]


class ImageCollector(Collector):
    def __init__(self, read: Callable[[], ImageInfo | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        info = self._read()
        if info is None:
            return []
        digest, offset = info
        g = GaugeMetricFamily(
            IMAGE_INFO, "The node's metadata image: a digest of its content", labels=["digest"]
        )
        g.add_metric([digest], 1.0)
        return [
            g,
            GaugeMetricFamily(
                IMAGE_OFFSET, "The metadata log offset the node's image was applied to", offset
            ),
        ]
