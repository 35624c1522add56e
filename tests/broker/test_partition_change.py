"""Elections and ISR changes the controller makes on broker events: unclean leader election
(``unclean.leader.election.enable``), a new incarnation leaving every ISR, and the leader epoch
bump on every leader change."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker.controller.cluster_control import ClusterControl
from broker.controller.partition_change import UncleanElection
from broker.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from protocol.metadata_records import latest_type

from .test_cluster_control import (
    CLUSTER,
    TIMEOUT,
    FakeCore,
    _beat,
    _core,
    _part,
    _register,
    _running,
    run,
)

TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
ConfigRecord = latest_type("ConfigRecord")
KEY = "unclean.leader.election.enable"


def _topic(core: FakeCore, name: str, replicas: list[int], isr: list[int], leader: int) -> None:
    tid = uuid.uuid4()
    run(
        core.commit(
            [
                TopicRecord(name=name, topic_id=tid),
                PartitionRecord(
                    partition_id=0,
                    topic_id=tid,
                    replicas=replicas,
                    isr=isr,
                    leader=leader,
                    leader_epoch=0,
                    partition_epoch=0,
                ),
            ]
        )
    )


def _config(core: FakeCore, resource_type: int, name: str, value: str | None) -> None:
    run(
        core.commit(
            [ConfigRecord(resource_type=resource_type, resource_name=name, name=KEY, value=value)]
        )
    )


def _world(unclean: UncleanElection | None = None) -> tuple[FakeCore, ClusterControl]:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT, unclean=unclean or UncleanElection())
    _running(core, cc, 1, 2, 3)
    # 1 leads alone: 2 and 3 fell out of the ISR
    _topic(core, "t", [1, 2, 3], [1], 1)
    return core, cc


def _state(core: FakeCore, name: str = "t") -> tuple[Any, ...]:
    p = _part(core, name, 0)
    return p.leader, p.isr, p.leader_epoch


def test_without_unclean_election_the_partition_goes_offline() -> None:
    core, cc = _world()
    assert _beat(cc, core, 1, 100, fence=True).is_fenced
    assert _state(core) == (-1, (1,), 1)


@pytest.mark.parametrize(
    ("scopes", "unclean"),
    [
        ({(TOPIC_RESOURCE, "t"): "true"}, True),
        ({(BROKER_RESOURCE, ""): "true"}, True),  # the cluster-wide dynamic default
        ({(BROKER_RESOURCE, "7"): "true"}, True),  # this controller node's dynamic config
        ({(BROKER_RESOURCE, "2"): "true"}, False),  # another node's: not the controller's
        ({(BROKER_RESOURCE, ""): "true", (TOPIC_RESOURCE, "t"): "false"}, False),
        ({(BROKER_RESOURCE, "7"): "false", (BROKER_RESOURCE, ""): "TRUE"}, False),
        ({(TOPIC_RESOURCE, "other"): "true"}, False),
    ],
)
def test_unclean_election_follows_topic_then_broker_configs(
    scopes: dict[tuple[int, str], str], unclean: bool
) -> None:
    core, cc = _world(UncleanElection(node_id=7))
    for (rtype, name), value in scopes.items():
        _config(core, rtype, name, value)
    assert _beat(cc, core, 1, 100, fence=True).is_fenced
    # unclean: the first active replica leads, and its log is the partition's: ISR = [leader]
    assert _state(core) == ((2, (2,), 1) if unclean else (-1, (1,), 1))


def test_static_default_and_a_topic_override() -> None:
    core, cc = _world(UncleanElection(static_default=True))
    _topic(core, "careful", [1, 3], [1], 1)
    _config(core, TOPIC_RESOURCE, "careful", "false")
    assert _beat(cc, core, 1, 100, fence=True).is_fenced
    assert _state(core) == (2, (2,), 1)
    assert _state(core, "careful") == (-1, (1,), 1)


def test_an_out_of_sync_replica_coming_back_is_elected_unclean() -> None:
    core, cc = _world()
    _config(core, TOPIC_RESOURCE, "t", "true")
    for b in (2, 3):
        assert _beat(cc, core, b, 50, fence=True).is_fenced
    assert _beat(cc, core, 1, 100, fence=True).is_fenced
    assert _state(core) == (-1, (1,), 1)  # nobody to elect
    assert not _beat(cc, core, 3, 200).is_fenced  # 3 is back: it leads, unclean
    assert _state(core) == (3, (3,), 2)


def test_an_ineligible_replica_is_not_elected_unclean() -> None:
    core, cc = _world()
    _config(core, TOPIC_RESOURCE, "t", "true")
    assert _beat(cc, core, 2, 50, shutdown=True).should_shutdown  # leads nothing: down at once
    assert _beat(cc, core, 1, 100, fence=True).is_fenced
    assert _state(core) == (3, (3,), 1)  # 2 is fenced: 3 comes next


def test_new_incarnation_leaves_every_isr_but_an_isr_of_one() -> None:
    core, cc = _world()
    assert _beat(cc, core, 3, 50, fence=True).is_fenced
    # ISRs that still name the fenced 3 (written before it was fenced, or by an older version)
    _topic(core, "stale", [1, 2, 3], [1, 2, 3], 1)
    _topic(core, "alone", [3, 1], [3], -1)
    before = _part(core, "stale", 0)
    code, epoch = _register(cc, 3, now=60, inc=uuid.uuid4())  # restarted: may have lost data
    assert int(code) == 0 and epoch == core.image.brokers[3].epoch
    after = _part(core, "stale", 0)
    assert (after.leader, after.isr, after.leader_epoch) == (1, (1, 2), 0)
    assert after.partition_epoch == before.partition_epoch + 1
    assert _state(core, "alone") == (-1, (3,), 0)  # an ISR is never emptied
    # the same incarnation registering again changes nothing
    n = len(core.batches)
    _register(cc, 3, now=70, inc=core.image.brokers[3].incarnation_id)
    assert all(type(r).__name__ == "RegisterBrokerRecord" for b in core.batches[n:] for r in b)


def test_every_leader_change_bumps_the_leader_epoch_and_drops_the_fenced_broker() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    _topic(core, "t", [1, 2, 3], [1, 2, 3], 1)
    assert _beat(cc, core, 1, 100, fence=True).is_fenced
    assert _state(core) == (2, (2, 3), 1)
    assert _beat(cc, core, 2, 200, shutdown=True).should_shutdown is False  # moves away first
    assert _state(core) == (3, (3,), 2)
    assert _beat(cc, core, 3, 300, fence=True).is_fenced
    assert _state(core) == (-1, (3,), 3)  # no leader is a leader change too
    assert not _beat(cc, core, 3, 400).is_fenced
    assert _state(core) == (3, (3,), 4)


@pytest.mark.parametrize("support", [None, "true"])
def test_unclean_election_of_a_mirror_partition_is_warned_about(
    support: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """KIP-1279: unclean election of a mirror partition is unsupported unless the topic sets
    mirror.support.unclean.leader.election: a WARNING says the log may now differ."""
    core, cc = _world()
    _config(core, TOPIC_RESOURCE, "t", "true")
    extra = [("mirror.name", "m")]
    if support is not None:
        extra.append(("mirror.support.unclean.leader.election", support))
    for key, value in extra:
        run(
            core.commit(
                [
                    ConfigRecord(
                        resource_type=TOPIC_RESOURCE, resource_name="t", name=key, value=value
                    )
                ]
            )
        )
    for b in (2, 3):
        assert _beat(cc, core, b, 50, fence=True).is_fenced
    assert _beat(cc, core, 1, 100, fence=True).is_fenced
    with caplog.at_level("WARNING", logger="broker.controller.partition_change"):
        assert not _beat(cc, core, 3, 200).is_fenced
    assert _state(core) == (3, (3,), 2)
    warned = [r for r in caplog.records if "mirror partition t-0" in r.getMessage()]
    assert len(warned) == (0 if support == "true" else 1)
