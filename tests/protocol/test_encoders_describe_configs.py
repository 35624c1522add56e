"""The DescribeConfigs encoder writes exactly kio's bytes in every version, repeated results
included, and a thousand repeats of one 300-config result cost one encoding."""

import time

import pytest
from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.encoders.describe_configs import encode_describe_configs_response
from protocol.registry import REGISTRY, body_bytes


def _response(version: int, repeats: int, configs: int) -> object:
    cls = REGISTRY.spec(32).response_type(version)
    one = {
        "error_code": ErrorCode.none,
        "resource_type": 4,
        "resource_name": "1",
        "configs": [
            {"name": f"c{i}", "value": None if i % 7 == 0 else "v", "read_only": i % 2 == 0,
             "config_source": 5, "is_sensitive": False,
             "synonyms": [{"name": f"s{i}", "value": "x", "source": 4}]}
            for i in range(configs)
        ],
    }  # fmt: skip
    other = {**one, "resource_name": "", "error_code": ErrorCode.invalid_request,
             "error_message": "no", "configs": []}  # fmt: skip
    resp = build(cls, {"throttle_time": 7, "results": [one, other]})
    shared, second = resp.results  # type: ignore[attr-defined]
    return build(cls, {"throttle_time": 7, "results": [shared] * repeats + [second]})


@pytest.mark.parametrize("version", range(1, 6))
def test_same_bytes_as_kio(version: int) -> None:
    resp = _response(version, 3, 5)
    assert encode_describe_configs_response(resp, version) == body_bytes(resp)
    empty = build(REGISTRY.spec(32).response_type(version), {"throttle_time": 0, "results": []})
    assert encode_describe_configs_response(empty, version) == body_bytes(empty)


def test_a_repeated_result_is_encoded_once() -> None:
    resp = _response(4, 1000, 300)
    started = time.perf_counter()
    raw = encode_describe_configs_response(resp, 4)
    took = time.perf_counter() - started
    assert len(raw) > 1000 * 300 * 10 and took < 1.0, took
