"""The sans-IO client quota manager (Kafka's ClientQuotaManager) against a fake clock."""

from types import MappingProxyType

import pytest

from broker.metadata.client_quotas import CLIENT_ID, USER, entity_key
from broker.quotas.client_quota_manager import ClientQuotaManager, Rate, user_of

P = "producer_byte_rate"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


def quotas(*rows: tuple[tuple[tuple[str, str | None], ...], float]) -> MappingProxyType:
    return MappingProxyType({entity_key(e): {P: v} for e, v in rows})


def test_no_quota_records_nothing() -> None:
    m = ClientQuotaManager(P, Clock())
    assert not m.enabled
    assert m.record("alice", "c1", 10**9) == 0
    assert m.stats.by_tags == {}
    m.update(quotas(((("user", "bob"),), 100)))
    assert m.enabled
    assert m.record("alice", "c1", 10**9) == 0  # no quota applies to alice
    assert m.stats.by_tags == {}


@pytest.mark.parametrize(
    ("entities", "tags"),
    [
        ([((USER, "alice"), (CLIENT_ID, "c1"))], ("alice", "c1")),
        ([((USER, "alice"), (CLIENT_ID, None))], ("alice", "c1")),
        ([((USER, "alice"),)], ("alice", "")),
        ([((USER, None), (CLIENT_ID, "c1"))], ("alice", "c1")),
        ([((USER, None), (CLIENT_ID, None))], ("alice", "c1")),
        ([((USER, None),)], ("alice", "")),
        ([((CLIENT_ID, "c1"),)], ("", "c1")),
        ([((CLIENT_ID, None),)], ("", "c1")),
    ],
)
def test_each_level_applies_alone(entities: list, tags: tuple[str, str]) -> None:
    m = ClientQuotaManager(P, Clock())
    m.update(quotas(*((e, 7.0) for e in entities)))
    r = m.resolve("alice", "c1")
    assert r is not None and r.tags == tags and r.limit == 7.0


def test_resolution_order_most_specific_first() -> None:
    order = [
        ((USER, "alice"), (CLIENT_ID, "c1")),
        ((USER, "alice"), (CLIENT_ID, None)),
        ((USER, "alice"),),
        ((USER, None), (CLIENT_ID, "c1")),
        ((USER, None), (CLIENT_ID, None)),
        ((USER, None),),
        ((CLIENT_ID, "c1"),),
        ((CLIENT_ID, None),),
    ]
    for i in range(len(order)):
        m = ClientQuotaManager(P, Clock())
        m.update(quotas(*((e, float(j + 1)) for j, e in enumerate(order[i:]))))
        r = m.resolve("alice", "c1")
        assert r is not None and r.limit == 1.0, order[i]


def test_other_keys_do_not_apply() -> None:
    m = ClientQuotaManager(P, Clock())
    m.update(MappingProxyType({entity_key([(USER, "alice")]): {"consumer_byte_rate": 1.0}}))
    assert not m.enabled and m.resolve("alice", "c") is None


def test_rate_window_and_throttle_formula() -> None:
    clock = Clock()
    m = ClientQuotaManager(P, clock, samples=11, window_s=1)
    m.update(quotas(((("client-id", "c1"),), 1000.0)))
    # 10 whole windows are assumed before the first sample: 10_000 B fit at once
    assert m.record("u", "c1", 10_000) == 0
    # 1000 B more: rate 11_000 B over 10 s = 1100 B/s; throttle (1100-1000)/1000 * 10 s
    assert m.record("u", "c1", 1000) == 1000
    clock.ms += 500
    # window 10.5 s, 12_000 B: 1142.857 B/s -> 0.142857 * 10_500 ms
    assert m.record("u", "c1", 1000) == round((12000 / 10.5 - 1000) / 1000 * 10500)
    m.throttled("u", "c1", 1500)
    assert m.stats.throttled_requests == 1 and m.stats.throttle_ms_total == 1500


def test_rate_is_bounded_by_throttling() -> None:
    """A client that waits the throttle time it is given stays close to its quota."""
    clock = Clock()
    m = ClientQuotaManager(P, clock)
    m.update(quotas(((("user", None),), 10_000.0)))
    start, sent = clock.ms, 0
    while clock.ms - start < 60_000:
        sent += 5_000
        wait = m.record("u", "c", 5_000)
        clock.ms += max(wait, 10)
    rate = sent / ((clock.ms - start) / 1000)
    assert 8_000 < rate < 12_500


def test_samples_expire() -> None:
    clock = Clock()
    rate = Rate(11, 1000)
    rate.record(11_000, clock.ms)
    assert rate.measure(clock.ms) == pytest.approx(1100)
    clock.ms += 11_000  # older than 11 windows: gone
    assert rate.measure(clock.ms) == 0


def test_unrecord_and_max_value() -> None:
    clock = Clock()
    m = ClientQuotaManager("consumer_byte_rate", clock)
    m.update(MappingProxyType({entity_key([(USER, None)]): {"consumer_byte_rate": 100.0}}))
    assert m.max_value_in_window("x", "c") == 100.0 * 10
    assert m.record("x", "c", 5000) > 0
    m.unrecord("x", "c", 5000)
    assert m.record("x", "c", 1) == 0
    assert ClientQuotaManager(P, clock).max_value_in_window("x", "c") == float("inf")


def test_update_keeps_sensors_and_drops_unquoted() -> None:
    clock = Clock()
    m = ClientQuotaManager(P, clock)
    m.update(quotas(((("user", "a"),), 100.0)))
    m.record("a", "c", 50)
    m.update(quotas(((("user", "a"),), 200.0)))
    assert m.stats.by_tags[("a", "")].limit == 200.0
    assert m.stats.by_tags[("a", "")].recorded == 50
    m.update(quotas())
    assert m.stats.by_tags == {}


def test_user_of_principal() -> None:
    assert user_of("User:alice") == "alice"
    assert user_of("User:ANONYMOUS") == "ANONYMOUS"


def test_ip_connection_rate() -> None:
    from broker.quotas.client_quota_manager import IpConnectionQuotaManager

    clock = Clock()
    m = IpConnectionQuotaManager(clock, samples=3, window_s=1)
    assert m.record("10.0.0.1") == 0  # no quota
    m.update(
        MappingProxyType(
            {
                entity_key([("ip", "10.0.0.1")]): {"connection_creation_rate": 2.0},
                entity_key([("ip", None)]): {"connection_creation_rate": 100.0},
                entity_key([("user", None)]): {"producer_byte_rate": 1.0},
            }
        )
    )
    # 2 windows' worth (4) at once, then throttled, at most one window
    assert [m.record("10.0.0.1") for _ in range(4)] == [0, 0, 0, 0]
    waits = [m.record("10.0.0.1") for _ in range(20)]
    assert all(0 < w <= 1000 for w in waits) and waits[-1] == 1000
    assert all(m.record("10.0.0.2") == 0 for _ in range(100))  # the default's rate
    clock.ms += 3000  # every sample expired
    assert m.record("10.0.0.1") == 0
    assert m.throttled == 20


@pytest.mark.serial
def test_timed_run_counts_only_the_handlers_own_steps() -> None:
    import asyncio
    import time

    from broker.api.client_throttle import TimedRun

    async def handler() -> int:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.02:
            pass
        await asyncio.sleep(0.1)
        t = time.perf_counter()
        while time.perf_counter() - t < 0.01:
            pass
        return 5

    async def main() -> tuple[int, float]:
        timer = TimedRun()
        return await timer.run(handler()), timer.seconds

    result, seconds = asyncio.run(main())
    assert result == 5 and 0.029 < seconds < 0.08

    async def cancelled() -> None:
        timer = TimedRun()
        task = asyncio.ensure_future(timer.run(asyncio.sleep(10)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())


def test_a_new_sensor_survives_the_idle_sweep() -> None:
    """Clocks far from 0 (time.monotonic() in ms): creating a sensor sweeps idle ones, never
    the one being created."""
    clock = Clock()
    clock.ms = 5e9
    m = ClientQuotaManager(P, clock)
    m.update(quotas(((("client-id", "c"),), 100.0)))
    m.record("u", "c", 50)
    assert m.stats.by_tags[("", "c")].recorded == 50
    clock.ms += 3_600_001 + 60_000
    m.update(quotas(((("client-id", "c"),), 100.0), ((("client-id", "d"),), 1.0)))
    m.record("u", "d", 1)  # sweeps "c", idle for over an hour
    assert set(m.stats.by_tags) == {("", "d")}
