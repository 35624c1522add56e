"""RetryBackoff: capped doubling, a retries count, one WARN per interval naming the request."""

import logging
import random

import pytest

from broker.network.retry_backoff import RetryBackoff


def test_doubles_up_to_the_cap_and_resets(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    b = RetryBackoff(
        "AlterPartition from broker 1",
        50,
        400,
        logging.getLogger("t"),
        jitter=0.0,
        monotonic=lambda: now[0],
        rng=random.Random(1),
    )
    with caplog.at_level("WARNING"):
        delays = [b.failed("STALE_BROKER_EPOCH") for _ in range(6)]
        assert delays == [0.05, 0.1, 0.2, 0.4, 0.4, 0.4]
        assert b.retries == 6
        now[0] = 61.0
        b.failed("STALE_BROKER_EPOCH")
    b.succeeded()
    assert b.failed("x") == 0.05
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert "AlterPartition from broker 1: STALE_BROKER_EPOCH" in warnings[0]
    assert "5 more like it" in warnings[1]


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="initial"):
        RetryBackoff("x", 0, 10, logging.getLogger("t"))
