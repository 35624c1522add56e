"""DescribeConfigs responses, each distinct result encoded once.

A request may name the same resource a thousand times (hundreds of configs each); the handler
shares one result object among the repeats, and this encoder writes that object's bytes once
and repeats them, instead of kio's writer walking 300,000 config entries. The bytes are
exactly kio's (``tests/protocol/test_encoders_describe_configs.py``).
"""

import io
from typing import Any

from kio.serial import entity_writer

from .primitives import I32, millis, uvarint

_FIRST_FLEXIBLE = 4


def encode_describe_configs_response(resp: Any, version: int) -> bytes:
    flexible = version >= _FIRST_FLEXIBLE
    out = io.BytesIO()
    out.write(I32.pack(millis(resp.throttle_time)))
    results = resp.results
    out.write(uvarint(len(results) + 1) if flexible else I32.pack(len(results)))
    done: dict[int, bytes] = {}
    for r in results:
        raw = done.get(id(r))
        if raw is None:
            buf = io.BytesIO()
            entity_writer(type(r))(buf, r)
            raw = done[id(r)] = buf.getvalue()
        out.write(raw)
    if flexible:
        out.write(b"\x00")  # no tagged fields at the top level
    return out.getvalue()
