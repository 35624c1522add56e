"""Client quotas without a node: the controller's validation (Kafka's messages), Describe's
filters, the image and its snapshot, and the CLI's Java formatting (checked against jshell)."""

import sys
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.client_quotas import FilterError, describe_entries
from broker.cli.admin import UsageError
from broker.cli.configs_quotas import (
    _java_entity_hash,
    _java_string_hash,
    java_double,
    java_hashmap_order,
    parse_value,
)
from broker.controller.client_quotas import Alteration, plan
from broker.metadata.client_quotas import entity_key
from broker.metadata.image import MetadataImage, apply_records
from broker.metadata.snapshot import image_digest, image_records
from protocol.metadata_records import latest_type

Q = latest_type("ClientQuotaRecord")
E = sys.modules[Q.__module__].EntityData
ALICE = (("user", "alice"),)


def _apply(img: MetadataImage, records: list[Any]) -> MetadataImage:
    new, _ = apply_records(img, [(img.offset + 1 + i, r) for i, r in enumerate(records)])
    return new


def test_plan_writes_records_and_skips_no_ops() -> None:
    results, records = plan({}, [Alteration(ALICE, (("producer_byte_rate", 1024.0),))])
    assert [r.error for r in results] == [ErrorCode.none]
    img = _apply(MetadataImage(), records)
    assert dict(img.client_quotas) == {entity_key(ALICE): {"producer_byte_rate": 1024.0}}
    # the same value again, and removing a key that is not set: nothing to write
    _, again = plan(
        img.client_quotas,
        [Alteration(ALICE, (("producer_byte_rate", 1024.0), ("consumer_byte_rate", None)))],
    )
    assert again == []
    _, removal = plan(img.client_quotas, [Alteration(ALICE, (("producer_byte_rate", None),))])
    assert dict(_apply(img, removal).client_quotas) == {}


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ((), (("producer_byte_rate", 1.0),), "Invalid empty client quota entity"),
        ((("group", "g"),), (), "Unhandled client quota entity type: group"),
        ((("user", ""),), (), "Empty user not supported"),
        ((("user", "a"), ("user", "b")), (), "duplicate entity entry user"),
        ((("ip", "1.2.3.4"), ("user", "a")), (), "IP entity should"),
        ((("ip", "not a host.invalid"),), (), "is not a valid IP or resolvable host."),
        (ALICE, (("nope", 1.0),), "Invalid configuration key nope"),
        (ALICE, (("producer_byte_rate", -1.0),), "Quota producer_byte_rate must be greater than 0"),
        (ALICE, (("producer_byte_rate", 0.5),), "producer_byte_rate cannot be a fractional value."),
        (ALICE, (("producer_byte_rate", 1e19),), "is too large for a LONG."),
        ((("ip", None),), (("connection_creation_rate", 3e9),), "too large for an INT."),
        ((("ip", None),), (("producer_byte_rate", 1.0),), "Invalid configuration key"),
        (ALICE, (("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)), "Duplicate quota key"),
    ],
)
def test_plan_refuses_as_kafka(entity: Any, ops: Any, message: str) -> None:
    results, records = plan({}, [Alteration(entity, ops)])
    assert results[0].error == ErrorCode.invalid_request
    assert message in (results[0].message or "")
    assert records == []


def test_plan_duplicate_entity_and_fractional_doubles() -> None:
    results, records = plan(
        {},
        [
            Alteration(ALICE, (("request_percentage", 12.5),)),
            Alteration(ALICE, (("controller_mutation_rate", 0.5),)),
        ],
    )
    assert results[0].error == ErrorCode.none
    assert "Ignoring duplicate entity" in (results[1].message or "")
    assert len(records) == 1


def _component(t: str, match_type: int, match: str | None = None) -> Any:
    return SimpleNamespace(entity_type=t, match_type=match_type, match=match)


QUOTAS = {
    entity_key([("user", "alice")]): {"producer_byte_rate": 1.0},
    entity_key([("user", None)]): {"producer_byte_rate": 2.0},
    entity_key([("user", "alice"), ("client-id", "c")]): {"producer_byte_rate": 3.0},
    entity_key([("client-id", "c")]): {"consumer_byte_rate": 4.0},
}


def _values(entries: list[dict[str, Any]]) -> list[float]:
    return sorted(e["values"][0]["value"] for e in entries)


def test_describe_filters() -> None:
    assert _values(describe_entries(QUOTAS, [_component("user", 2)], True)) == [1.0, 2.0]
    assert _values(describe_entries(QUOTAS, [_component("user", 2)], False)) == [1.0, 2.0, 3.0]
    assert _values(describe_entries(QUOTAS, [_component("user", 0, "alice")], True)) == [1.0]
    assert _values(describe_entries(QUOTAS, [_component("user", 1)], True)) == [2.0]
    both = [_component("user", 0, "alice"), _component("client-id", 0, "c")]
    assert _values(describe_entries(QUOTAS, both, True)) == [3.0]
    assert _values(describe_entries(QUOTAS, [], False)) == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        (
            [_component("user", 2), _component("user", 1)],
            ErrorCode.invalid_request,
            "more than once",
        ),
        ([_component("group", 2)], ErrorCode.unsupported_version, "Unsupported entity type group"),
        ([_component("user", 0)], ErrorCode.invalid_request, "MATCH_TYPE_EXACT"),
        ([_component("user", 1, "x")], ErrorCode.invalid_request, "MATCH_TYPE_DEFAULT"),
        ([_component("user", 2, "x")], ErrorCode.invalid_request, "MATCH_TYPE_SPECIFIED"),
        ([_component("user", 7)], ErrorCode.invalid_request, "Unknown match type 7"),
        ([_component("ip", 2), _component("user", 2)], ErrorCode.invalid_request, "IP filter"),
    ],
)
def test_describe_bad_filters(components: Any, code: ErrorCode, message: str) -> None:
    with pytest.raises(FilterError) as e:
        describe_entries(QUOTAS, components, False)
    assert e.value.code == code and message in str(e.value)


def test_snapshot_round_trip_and_digest() -> None:
    _, records = plan(
        {},
        [
            Alteration((("user", None), ("client-id", "c")), (("producer_byte_rate", 5.0),)),
            Alteration((("ip", None),), (("connection_creation_rate", 7.0),)),
        ],
    )
    img = _apply(MetadataImage(), records)
    rebuilt, _ = apply_records(MetadataImage(), image_records(img))
    assert rebuilt.client_quotas == img.client_quotas
    assert image_digest(rebuilt) == image_digest(img) != image_digest(MetadataImage())


def test_java_formatting_as_jshell_prints_it() -> None:
    keys = ["producer_byte_rate", "consumer_byte_rate", "request_percentage"]
    keys.append("controller_mutation_rate")
    assert java_hashmap_order([(_java_string_hash(k), k) for k in keys[:2]], 2) == [
        "consumer_byte_rate",
        "producer_byte_rate",
    ]
    assert java_hashmap_order([(_java_string_hash(k), k) for k in keys], 4) == [
        "producer_byte_rate",
        "consumer_byte_rate",
        "controller_mutation_rate",
        "request_percentage",
    ]
    values = (1e-4, 123456789.0, 0.001, 12.5, 1e7, 9999999.0, 1e300)
    assert [java_double(v) for v in values] == [
        "1.0E-4", "1.23456789E8", "0.001", "12.5", "1.0E7", "9999999.0", "1.0E300",
    ]  # fmt: skip
    h = _java_entity_hash([("client-id", "c1"), ("user", None)])
    assert h - (1 << 32) == -1900539299  # Objects.hash({user=null, client-id=c1})


def test_parse_value_as_java() -> None:
    assert parse_value("k", "1e3") == 1000.0
    assert parse_value("k", " 5d ") == 5.0
    assert parse_value("k", "-2") == -2.0
    for bad in ("abc", "1_000", "", "0x10"):
        with pytest.raises(UsageError, match="Cannot parse quota configuration value for k"):
            parse_value("k", bad)


def test_validate_only_commits_nothing() -> None:
    import asyncio
    import contextlib

    from broker.controller.client_quotas import ClientQuotaController

    committed: list[Any] = []

    class FakeController:
        lock = contextlib.AsyncExitStack()  # any async context manager

        def current_image(self) -> MetadataImage:
            return MetadataImage()

        async def commit(self, records: Any) -> int:
            committed.extend(records)
            return 0

    c = ClientQuotaController(FakeController())  # type: ignore[arg-type]
    alteration = [Alteration(ALICE, (("producer_byte_rate", 10.0),))]
    results = asyncio.run(c.alter(alteration, validate_only=True))
    assert [r.error for r in results] == [ErrorCode.none] and committed == []
    bad = [Alteration(ALICE, (("producer_byte_rate", -1.0),))]
    assert asyncio.run(c.alter(bad, validate_only=True))[0].error == ErrorCode.invalid_request
    asyncio.run(c.alter(alteration, validate_only=False))
    assert len(committed) == 1
