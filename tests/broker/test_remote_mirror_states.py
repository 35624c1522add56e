"""RoutedMirrorStates: mirror state writes to a coordinator on another node (WriteMirrorStates)."""

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from broker.coordinator.runtime import CoordinatorError
from broker.metadata.mirror_states import MirrorState
from broker.mirror.remote_states import WRITE_MIRROR_STATES, RoutedMirrorStates
from tests.waits import wait_for_async

TOPIC_ID = uuid.UUID("5f0e7a9c-3b1d-4c2e-8a4f-6d7b9e0c1a2b")


class HeldClients:
    """Answers each request only when the test says so."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any], asyncio.Future[Any]]] = []

    async def request(self, node: int, api_key: int, body: Any, version: int) -> Any:
        assert node == 2 and api_key == WRITE_MIRROR_STATES
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.sent.append((dict(body), answer))
        return await answer

    def answer(self, i: int, errors: dict[int, int] | None = None) -> None:
        body, answer = self.sent[i]
        topics = [
            SimpleNamespace(
                name=t["name"],
                partitions=[
                    SimpleNamespace(
                        partition_index=p["partition_index"],
                        error_code=(errors or {}).get(p["partition_index"], 0),
                    )
                    for p in t["partitions"]
                ],
            )
            for t in body["topics"]
        ]
        answer.set_result(SimpleNamespace(error_code=0, error_message=None, topics=topics))


def routed(clients: HeldClients) -> RoutedMirrorStates:
    local = SimpleNamespace(partition_for=lambda mirror, topic_id, partition: 0)
    return RoutedMirrorStates(local, lambda _p: 2, lambda _id: "t", 1, clients)  # type: ignore[arg-type]


async def sent(clients: HeldClients, n: int) -> None:
    await wait_for_async(lambda: len(clients.sent) == n, 5, f"{n} requests sent")


def test_writes_are_sent_without_waiting_for_the_answer_before() -> None:
    async def body() -> None:
        clients = HeldClients()
        states = routed(clients)
        writes = []
        for p in range(3):  # a loop turn apart: three requests, all in flight at once
            writes.append(
                asyncio.ensure_future(states.write_state("m", TOPIC_ID, p, MirrorState.STOPPING))
            )
            await sent(clients, p + 1)
        assert len(clients.sent) == 3 and not any(w.done() for w in writes)
        clients.answer(2)
        clients.answer(1, errors={1: 134})
        clients.answer(0)
        await asyncio.wait(writes)
        assert writes[0].exception() is None and writes[2].exception() is None
        failed = writes[1].exception()
        assert isinstance(failed, CoordinatorError) and failed.code == 134  # KIP-1279 code

    asyncio.run(asyncio.wait_for(body(), 10))


def test_a_partition_waits_for_the_answer_to_its_previous_write() -> None:
    async def body() -> None:
        clients = HeldClients()
        states = routed(clients)
        first = asyncio.ensure_future(states.write_state("m", TOPIC_ID, 0, MirrorState.STOPPING))
        second = asyncio.ensure_future(states.write_state("m", TOPIC_ID, 0, MirrorState.STOPPED))
        other = asyncio.ensure_future(states.write_state("m", TOPIC_ID, 5, MirrorState.STOPPING))
        senders = states._senders
        # the sender has looked at all three writes and stopped: 0's second is left for later
        await wait_for_async(
            lambda: (t := senders.get((2, "m"))) is not None and t.done(),
            5,
            "the first send round done",
        )
        assert len(clients.sent) == 1  # partition 5 joined the first request; 0's second waits
        assert [p["partition_index"] for p in clients.sent[0][0]["topics"][0]["partitions"]] == [
            0,
            5,
        ]
        clients.answer(0)
        await sent(clients, 2)
        assert first.done() and other.done() and not second.done()
        assert len(clients.sent) == 2
        assert clients.sent[1][0]["topics"][0]["partitions"][0]["state"] == int(MirrorState.STOPPED)
        clients.answer(1)
        await second

    asyncio.run(asyncio.wait_for(body(), 10))


def test_a_lost_connection_fails_the_batch_and_later_writes_still_go() -> None:
    async def body() -> None:
        clients = HeldClients()
        states = routed(clients)
        first = asyncio.ensure_future(states.write_state("m", TOPIC_ID, 0, MirrorState.STOPPING))
        await sent(clients, 1)
        clients.sent[0][1].set_exception(OSError("connection reset"))
        with pytest.raises(CoordinatorError):
            await first
        again = asyncio.ensure_future(states.write_state("m", TOPIC_ID, 0, MirrorState.STOPPING))
        await sent(clients, 2)
        clients.answer(1)
        await again

    asyncio.run(asyncio.wait_for(body(), 10))
