"""The group coordinator's metrics: group counts per protocol and state from the loaded shards,
rebalance and offset commit counters from the records written (a reload counts nothing)."""

import uuid

from prometheus_client import generate_latest

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.consumer_shard import HeartbeatParams
from broker.coordinator.group.shard import CommitItem, CommitParams
from broker.coordinator.group.share_groups import ShareHeartbeatParams
from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from broker.metrics.broker_metrics import BrokerMetrics
from tests.broker.group_support import PARTITIONS, Env, async_test, config

P = "kafka_server_group_coordinator_metrics"
T1 = uuid.UUID(int=1)


async def _env() -> Env:
    sched = ManualScheduler()
    coord = GroupCoordinator(config(), sched, lambda: {"a": (T1, 2), "b": (uuid.UUID(int=2), 1)})
    env = Env(coord, sched)
    for p in range(PARTITIONS):
        env.logs[p] = InMemoryRecordLog()
        await coord.load(p, env.logs[p])
    return env


def _scrape(coord: GroupCoordinator) -> str:
    m = BrokerMetrics()
    m.watch_groups(coord.metrics_snapshot)
    return generate_latest(m.registry).decode()


@async_test
async def test_counts_per_protocol_and_state_and_counters() -> None:
    env = await _env()
    c = env.coord
    # a classic group made by a commit (an Empty group with offsets): two offsets
    items = [CommitItem("a", 0, 5, -1, None), CommitItem("a", 1, 7, -1, None)]
    commit = CommitParams("cg", -1, "", None, -1, items, 9)
    assert await c.commit_offsets(commit) == [0, 0]
    # a consumer group member (epoch 1), then a second member (epoch 2): two rebalances
    for member in ("x", "y"):
        await c.consumer_group_heartbeat(
            HeartbeatParams(
                "kg", member, 0, rebalance_timeout_ms=5000, topic_names=("a",), owned={}
            )
        )
    # two share groups, one of which its member leaves (epochs 1, 2 and 1): three rebalances
    for group in ("s1", "s2"):
        await c.share_group_heartbeat(ShareHeartbeatParams(group, "m", 0, topic_names=("a",)))
    await c.share_group_heartbeat(ShareHeartbeatParams("s2", "m", -1))
    text = _scrape(c)
    for series in (
        f'{P}_group_count{{protocol="classic"}} 1.0',
        f'{P}_group_count{{protocol="consumer"}} 1.0',
        f'{P}_group_count{{protocol="share"}} 2.0',
        f'{P}_classic_group_count{{state="Empty"}} 1.0',
        f'{P}_consumer_group_count{{state="Stable"}} 0.0',
        f'{P}_share_group_count{{state="Stable"}} 1.0',
        f'{P}_share_group_count{{state="Empty"}} 1.0',
        f'{P}_share_group_count{{state="Dead"}} 0.0',
        f"{P}_consumer_group_rebalance_total 2.0",
        f"{P}_share_group_rebalance_total 3.0",
        f"{P}_offset_commit_total 2.0",
    ):
        assert series in text, series
    assert (
        sum(
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith(f"{P}_consumer_group_count{{")
        )
        == 1.0
    )
    # a reload replays the records: the counters stay, the groups are counted again
    for p in range(PARTITIONS):
        await c.unload(p)
    assert f'{P}_group_count{{protocol="share"}} 0.0' in _scrape(c)
    for p in range(PARTITIONS):
        await c.load(p, env.logs[p])
    text = _scrape(c)
    assert f"{P}_offset_commit_total 2.0" in text and f"{P}_share_group_rebalance_total 3.0" in text
    assert f'{P}_group_count{{protocol="share"}} 2.0' in text
