"""The connection limits' bookkeeping (broker.network.connection_quotas), without sockets."""

import math

import pytest

from broker.network.connection_quotas import (
    UNLIMITED,
    ConnectionLimits,
    ConnectionQuotas,
    TokenBucket,
)

LISTENERS = frozenset({"CLIENT", "INTERNAL", "CONTROLLER"})


def quotas(**limits: object) -> ConnectionQuotas:
    settings: dict[str, object] = {
        "inter_broker_listener": "INTERNAL",
        "exempt_listeners": frozenset({"CONTROLLER"}),
        "listeners": LISTENERS,
    }
    settings.update(limits)
    return ConnectionQuotas(ConnectionLimits(**settings), now=0.0)  # type: ignore[arg-type]


def test_defaults_limit_nothing() -> None:
    q = quotas()
    for _ in range(1000):
        assert q.blocked("CLIENT") is None
        assert not q.ip_refused("CLIENT", "10.0.0.1")
        assert q.creation_wait("CLIENT", 0.0) == 0
        q.created("CLIENT", 0.0)
        q.opened("CLIENT", "10.0.0.1")
    assert q.total == 1000 and q.per_ip == {"10.0.0.1": 1000}


def test_per_ip_limit_and_overrides() -> None:
    q = quotas(max_connections_per_ip=2, per_ip_overrides={"10.0.0.9": 3, "10.0.0.8": 0})
    for _ in range(2):
        q.opened("CLIENT", "10.0.0.1")
        q.opened("CLIENT", "10.0.0.9")
    assert q.ip_refused("CLIENT", "10.0.0.1")  # its 3rd
    assert not q.ip_refused("CLIENT", "10.0.0.9")  # overridden to 3
    assert q.ip_refused("CLIENT", "10.0.0.8")  # 0: refused altogether
    assert not q.ip_refused("CONTROLLER", "10.0.0.1")  # exempt listener
    assert not q.ip_refused("INTERNAL", "10.0.0.2")
    q.closed("CLIENT", "10.0.0.1")
    assert not q.ip_refused("CLIENT", "10.0.0.1")
    q.closed("CLIENT", "10.0.0.1")
    assert "10.0.0.1" not in q.per_ip  # no entry left behind per address ever seen


def test_node_limit_blocks_all_but_the_inter_broker_listener() -> None:
    q = quotas(max_connections=2)
    q.opened("CLIENT", "a")
    assert q.blocked("CLIENT") is None
    q.opened("CLIENT", "b")
    assert q.blocked("CLIENT") == "max.connections"
    assert q.blocked("INTERNAL") is None  # protected: it goes past the node's limit
    assert q.blocked("CONTROLLER") is None  # exempt
    assert not q.over_node_limit()
    q.opened("INTERNAL", "c")
    assert q.over_node_limit()  # one of CLIENT's connections is to be closed
    q.closed("CLIENT", "a")
    assert not q.over_node_limit() and q.blocked("CLIENT") == "max.connections"
    q.closed("INTERNAL", "c")
    assert q.blocked("CLIENT") is None


def test_listener_limit_holds_the_inter_broker_listener_too() -> None:
    q = quotas(listener_max_connections={"INTERNAL": 1, "CLIENT": 5})
    q.opened("INTERNAL", "a")
    assert q.blocked("INTERNAL") == "listener.name.internal.max.connections"
    assert q.blocked("CLIENT") is None


def test_a_lone_inter_broker_listener_is_not_protected() -> None:
    q = quotas(
        max_connections=1,
        max_creation_rate=1,
        inter_broker_listener="PLAINTEXT",
        listeners=frozenset({"PLAINTEXT", "CONTROLLER"}),
    )
    q.opened("PLAINTEXT", "a")
    assert q.blocked("PLAINTEXT") == "max.connections"
    q.created("PLAINTEXT", 0.0)
    assert q.creation_wait("PLAINTEXT", 0.0) == pytest.approx(1.0)


def test_creation_rate_node_and_listener() -> None:
    q = quotas(max_creation_rate=10, listener_creation_rate={"INTERNAL": 2})
    for _ in range(10):  # a second's worth at once
        assert q.creation_wait("CLIENT", 0.0) == 0
        q.created("CLIENT", 0.0)
    assert q.creation_wait("CLIENT", 0.0) == pytest.approx(0.1)
    assert q.creation_wait("CLIENT", 0.05) == pytest.approx(0.05)
    assert q.creation_wait("CLIENT", 0.1) == 0
    # the inter-broker listener is only held by its own rate
    for _ in range(2):
        assert q.creation_wait("INTERNAL", 0.1) == 0
        q.created("INTERNAL", 0.1)
    assert q.creation_wait("INTERNAL", 0.1) == pytest.approx(0.5)
    assert q.creation_wait("CLIENT", 0.1) == 0  # INTERNAL took none of the node's tokens
    assert q.creation_wait("CONTROLLER", 0.1) == 0


def test_token_bucket_refills_up_to_one_second() -> None:
    b = TokenBucket(4, 0.0)
    for _ in range(4):
        b.take(0.0)
    assert b.wait(0.0) == pytest.approx(0.25)
    assert b.wait(100.0) == 0 and b.tokens == 4  # capped at a second's worth
    zero = TokenBucket(0, 0.0)
    assert math.isinf(zero.wait(5.0))


def test_unlimited_rate_keeps_no_bucket() -> None:
    q = quotas(max_creation_rate=UNLIMITED)
    assert q.creation_wait("CLIENT", 0.0) == 0
    q.created("CLIENT", 0.0)


def test_override_host_names_count_for_their_addresses() -> None:
    from broker.network.node_server import resolve_ip_overrides

    got = resolve_ip_overrides({"localhost": 3, "10.0.0.1": 2, "nothing.invalid": 1})
    assert got["127.0.0.1"] == 3 and got["10.0.0.1"] == 2
    assert not any(count == 1 for count in got.values())  # did not resolve: left out
