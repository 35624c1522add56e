"""The ``controller_id`` of a Metadata answer: the answering node while it is listed (alive: it
answers), else a random listed broker. Fenced brokers (and brokers without the client's
listener) are never named."""

import asyncio
from typing import cast

from broker.api.context import RequestContext
from broker.api.metadata import MetadataApi, controller_for_clients
from broker.api.services import Services
from broker.metadata.image import BrokerImage, EndpointImage
from protocol.build import build
from protocol.headers import RequestHeader
from protocol.registry import REGISTRY

from .test_metadata_topic_ids import FakeServices, Image


def _broker(node_id: int, *, fenced: bool = False, listener: str = "PLAINTEXT") -> BrokerImage:
    ep = EndpointImage(listener, "127.0.0.1", 9000 + node_id, 0)
    return BrokerImage(node_id, 1, (ep,), None, fenced)


def controller_ids(brokers: list[BrokerImage], asks: int = 60) -> set[int]:
    s = FakeServices(Image(brokers={b.broker_id: b for b in brokers}))
    api = MetadataApi(cast(Services, s))
    header = RequestHeader(
        api_key=3, api_version=12, correlation_id=1, client_id="t", header_version=2
    )
    ctx = RequestContext(header=header, connection_id="c", listener="PLAINTEXT", peer_host="h")
    req = build(REGISTRY.spec(3).request_type(12), {"topics": []})
    return {asyncio.run(api.handle(ctx, req)).controller_id for _ in range(asks)}


def test_the_answering_node_is_named_while_listed() -> None:
    # not a random one: another broker may be dead but not yet fenced, and librdkafka's admin
    # client does not retry a CreateTopics whose broker handle is dropped
    assert controller_ids([_broker(1), _broker(2), _broker(3)]) == {1}


def test_fenced_brokers_and_other_listeners_are_never_named() -> None:
    brokers = [
        _broker(1, fenced=True),  # the answering node itself, fenced (controlled shutdown)
        _broker(2),
        _broker(3),
        _broker(4, fenced=True),
        _broker(5, listener="INTERNAL"),
    ]
    assert controller_ids(brokers) == {2, 3}


def test_no_broker_at_all_is_minus_one() -> None:
    assert controller_for_clients([], 1) == -1
