"""AddRaftVoter (80) / RemoveRaftVoter (81) on a lone voter driven for real (QuorumDriver over
the Raft core): Kafka's refusals and error codes, and the authorization each needs."""

import asyncio
import random
import time
import uuid
from typing import Any

from broker.api.context import RequestContext
from broker.api.dispatcher import Dispatcher
from broker.api.raft_voters import RaftVotersApi
from broker.network.client import ReconnectingClient
from broker.quorum.controller_registration import ControllerRegistrar
from broker.quorum.driver import QuorumDriver
from broker.raft import messages as m
from broker.raft.core import RaftCore
from broker.raft.quorum_state import MemoryQuorumStateStore
from broker.raft.replicated_log import MemoryLog
from broker.raft.voter_set import VoterEntry, VoterSet
from protocol.build import build
from protocol.records.kraft_control import encode_kraft_version
from protocol.registry import REGISTRY

from .network_support import run
from .test_describe_quorum_api import DenyAll, Listener

DIR_1 = uuid.UUID(int=11)
CLUSTER = "kmirror-test"


def _no_peers(dest: int, host: str, port: int) -> ReconnectingClient:
    raise AssertionError("a lone voter has no peers")


def lone_core(dynamic: bool) -> RaftCore:
    log = MemoryLog()
    if dynamic:
        voters = VoterSet((VoterEntry(1, DIR_1),))
        log.bootstrap(
            ((m.KRAFT_VERSION, encode_kraft_version(1)), (m.KRAFT_VOTERS, voters.encode()))
        )
    static = frozenset() if dynamic else frozenset({1})
    return RaftCore(1, static, log, MemoryQuorumStateStore(), random.Random(1), directory_id=DIR_1)


def call(api: RaftVotersApi, key: int, version: int, fields: dict[str, Any]) -> Any:
    body = build(REGISTRY.spec(key).request_type(version), fields)
    frame = REGISTRY.encode_request(version, 5, "test", body)[4:]

    def ctx(header: Any) -> RequestContext:
        return RequestContext(header, "c1", "CONTROLLER", "127.0.0.1")

    async def go() -> Any:
        parts = await Dispatcher(api.apis()).handle(ctx, memoryview(frame))
        assert parts is not None
        return REGISTRY.decode_response(key, version, b"".join(bytes(p) for p in parts))[1]

    return asyncio.get_running_loop().create_task(go())


def add(voter_id: int, directory: uuid.UUID, timeout_ms: int = 200, **kw: Any) -> dict[str, Any]:
    return {
        "cluster_id": kw.get("cluster_id"),
        "timeout": timeout_ms,
        "voter_id": voter_id,
        "voter_directory_id": directory,
        "listeners": [{"name": "CONTROLLER", "host": "h", "port": 9093}],
        "ack_when_committed": True,
    }


def remove(voter_id: int, directory: uuid.UUID) -> dict[str, Any]:
    return {"cluster_id": None, "voter_id": voter_id, "voter_directory_id": directory}


def answers(dynamic: bool, requests: list[tuple[int, int, dict[str, Any]]], **kw: Any) -> list[Any]:
    async def go() -> list[Any]:
        clock = lambda: int(time.monotonic() * 1000)  # noqa: E731
        driver = QuorumDriver(lone_core(dynamic), {}, Listener(), clock, _no_peers)
        driver.start()
        try:
            for _ in range(100):  # until it leads and committed its epoch's first entry
                if driver.core.is_leader and driver.core.high_watermark > 0:
                    break
                await asyncio.sleep(0.01)
            api = RaftVotersApi(lambda: driver, lambda: CLUSTER, **kw)
            out = []
            for key, version, fields in requests:
                out.append(await call(api, key, version, fields))
            return out
        finally:
            await driver.close()

    return run(go())


def test_kafka_refusals() -> None:
    r = answers(
        True,
        [
            (80, 1, add(1, uuid.uuid4())),  # already a voter
            (80, 1, add(2, uuid.uuid4())),  # never fetched: not caught up before its timeout
            (81, 0, remove(1, uuid.uuid4())),  # not that directory
            (81, 0, remove(1, DIR_1)),  # the last voter
            (80, 1, add(2, uuid.uuid4(), cluster_id="other")),
        ],
    )
    assert [int(x.error_code) for x in r] == [
        m.DUPLICATE_VOTER,
        m.REQUEST_TIMED_OUT,
        m.VOTER_NOT_FOUND,
        m.VOTER_NOT_FOUND,
        m.INCONSISTENT_CLUSTER_ID,
    ]
    assert "is already part of the set of voters" in r[0].error_message
    assert "lagging behind" in r[1].error_message
    assert r[3].error_message.startswith("Cannot remove voter ReplicaKey(id=1")


def test_static_voters_cannot_change() -> None:
    (r,) = answers(False, [(81, 0, remove(1, uuid.UUID(int=0)))])
    assert int(r.error_code) == m.UNSUPPORTED_VERSION
    assert "kraft.version feature is 0" in r.error_message


def test_add_and_remove_need_alter_on_the_cluster() -> None:
    r = answers(
        True, [(80, 1, add(2, uuid.uuid4())), (81, 0, remove(1, DIR_1))], authorizer=DenyAll
    )
    assert [int(x.error_code) for x in r] == [31, 31]  # CLUSTER_AUTHORIZATION_FAILED


def test_controller_registration_is_kept_by_the_leader() -> None:
    registrar = ControllerRegistrar(3, [("CONTROLLER", "h3", 9097, 0)], send=_unused_send)

    async def go() -> tuple[Any, RaftVotersApi, QuorumDriver]:
        clock = lambda: int(time.monotonic() * 1000)  # noqa: E731
        driver = QuorumDriver(lone_core(True), {}, Listener(), clock, _no_peers)
        driver.start()
        try:
            for _ in range(100):
                if driver.core.is_leader:
                    break
                await asyncio.sleep(0.01)
            api = RaftVotersApi(lambda: driver, lambda: CLUSTER)
            resp = await call(api, 70, 0, registrar.body())
            return resp, api, driver
        finally:
            await driver.close()

    resp, api, driver = run(go())
    assert int(resp.error_code) == 0
    assert api.registrations[3].listeners == (("CONTROLLER", "h3", 9097, 0),)
    assert driver.endpoint(3) == ("h3", 9097)  # the leader now knows where 3 listens


async def _unused_send(key: int, body: dict[str, Any]) -> Any:
    raise AssertionError("not sent in this test")


def test_update_raft_voter_changes_the_endpoints() -> None:
    async def go() -> tuple[list[Any], QuorumDriver]:
        clock = lambda: int(time.monotonic() * 1000)  # noqa: E731
        driver = QuorumDriver(lone_core(True), {}, Listener(), clock, _no_peers)
        driver.start()
        try:
            for _ in range(100):
                if driver.core.is_leader and driver.core.high_watermark > 0:
                    break
                await asyncio.sleep(0.01)
            api = RaftVotersApi(lambda: driver, lambda: CLUSTER)
            body = {
                "cluster_id": CLUSTER,
                "current_leader_epoch": driver.core.epoch,
                "voter_id": 1,
                "voter_directory_id": DIR_1,
                "listeners": [{"name": "CONTROLLER", "host": "moved", "port": 9999}],
                "k_raft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
            }
            stale = {**body, "current_leader_epoch": driver.core.epoch - 1}
            other = {**body, "voter_directory_id": uuid.uuid4()}
            out = [await call(api, 82, 0, b) for b in (body, stale, other)]
            return out, driver
        finally:
            await driver.close()

    (ok, stale, other), driver = run(go())
    assert int(ok.error_code) == 0
    assert int(stale.error_code) == m.FENCED_LEADER_EPOCH
    assert int(other.error_code) == m.VOTER_NOT_FOUND
    assert driver.core.voter_set.endpoint(1, "CONTROLLER") == ("moved", 9999)
    assert (ok.current_leader.leader_id, ok.current_leader.leader_epoch) == (1, driver.core.epoch)
