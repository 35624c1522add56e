"""The mirror fetchers' shared token bucket (mirror.replication.throttled.rate)."""

from broker.mirror.fetch_throttle import TokenBucket


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_unthrottled_never_waits() -> None:
    bucket = TokenBucket(FakeTime())
    bucket.consume(10**9)
    assert bucket.delay() == 0.0
    assert bucket.request_cap() is None


def test_debt_is_paid_back_at_the_rate() -> None:
    t = FakeTime()
    bucket = TokenBucket(t)
    bucket.set_rate(1000)
    assert bucket.delay() == 0.0
    bucket.consume(2000)
    assert bucket.delay() == 2.0
    t.now += 1.5
    assert abs(bucket.delay() - 0.5) < 1e-9
    t.now += 0.5
    assert bucket.delay() == 0.0
    # Idle time only saves up a small burst.
    t.now += 100
    bucket.consume(1000)
    assert abs(bucket.delay() - 0.8) < 1e-9
    assert bucket.request_cap() == 200


def test_rate_change_applies_at_once() -> None:
    t = FakeTime()
    bucket = TokenBucket(t)
    bucket.set_rate(1000)
    bucket.consume(1000)
    bucket.set_rate(None)
    assert bucket.delay() == 0.0
    bucket.set_rate(500)
    bucket.consume(1000)
    assert bucket.delay() == 2.0
