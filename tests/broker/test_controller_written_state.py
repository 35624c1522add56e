"""The controller validates against its written state: the committed image plus every batch it
appended in its leader epoch (issue 27). The reproducer: a CreateTopics whose caller is cancelled
(its client's connection closed) after the batch went into the log but before it committed used
to release the controller lock with the image still lacking the topic, so the next CreateTopics
for the same name appended a second TopicRecord with another topic id."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.controller import Controller, TopicSpec, Validators
from broker.controller.written_state import WrittenState
from broker.metadata.image import MetadataImage, apply_records
from broker.quorum.driver import NotLeaderError
from protocol.metadata_records import decode_metadata_record, encode_metadata_record, latest_type

TopicRecord = latest_type("TopicRecord")
RegisterBrokerRecord = latest_type("RegisterBrokerRecord")


class LaggingQuorum:
    """A leader whose log commits only when told to (``commit_all``), and can lose/regain the
    leadership. Committed records are applied to ``image`` (round-tripped through the wire
    encoding), as the node's commit listener does; uncommitted ones are dropped on a leader
    change (another leader's log would truncate them)."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.log: list[tuple[int, int, Any]] = []  # (offset, epoch, record)
        self.committed = 0  # entries below are committed
        self.epoch = 1
        self.leader = True
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []

    # the controller's interface
    def leader_epoch(self) -> int | None:
        return self.epoch if self.leader else None

    def begin_append(self, records: Sequence[Any]) -> tuple[int, int]:
        if not self.leader:
            raise NotLeaderError(-1, self.epoch)
        for r in records:
            self.log.append((len(self.log), self.epoch, r))
        return self.epoch, len(self.log) - 1

    async def wait_committed(self, epoch: int, last: int) -> None:
        if last < self.committed:
            return
        if epoch != self.epoch:
            raise NotLeaderError(-1, self.epoch)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((epoch, last, fut))
        await fut

    async def append(self, records: Sequence[Any]) -> int:
        epoch, last = self.begin_append(records)
        await self.wait_committed(epoch, last)
        return last

    # the test's controls
    def commit_all(self) -> None:
        pairs = [
            (off, decode_metadata_record(encode_metadata_record(r)))
            for off, _e, r in self.log[self.committed :]
        ]
        self.image, _ = apply_records(self.image, pairs)
        self.committed = len(self.log)
        for _e, last, fut in self._waiters:
            if last < self.committed and not fut.done():
                fut.set_result(None)
        self._waiters = [w for w in self._waiters if not w[2].done()]

    def change_leader(self, regain: bool) -> None:
        """A new epoch: the uncommitted tail is truncated (the next leader never had it)."""
        del self.log[self.committed :]
        self.epoch += 1
        self.leader = regain
        for _e, _last, fut in self._waiters:
            if not fut.done():
                fut.set_exception(NotLeaderError(-1, self.epoch))
        self._waiters = []


def _controller(q: LaggingQuorum) -> Controller:
    v = Validators(lambda k, v: v, lambda k, v: v, default_partitions=1)
    return Controller(q, lambda: q.image, v, node_id=1)


def _topic_records(q: LaggingQuorum) -> list[tuple[str, uuid.UUID]]:
    return [(r.name, r.topic_id) for _o, _e, r in q.log if isinstance(r, TopicRecord)]


async def _until_appended(q: LaggingQuorum, n: int) -> None:
    for _ in range(100):
        if len(q.log) >= n:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"the log never reached {n} entries")


def test_cancelled_create_does_not_let_a_second_create_of_the_name_through() -> None:
    async def main() -> None:
        q = LaggingQuorum()
        c = _controller(q)
        first = asyncio.ensure_future(c.create_topics([TopicSpec("t")], False))
        await _until_appended(q, 2)  # TopicRecord + PartitionRecord are in the log
        first.cancel()  # the client's connection closed: its request task is cancelled
        with pytest.raises(asyncio.CancelledError):
            await first
        second = asyncio.ensure_future(c.create_topics([TopicSpec("t")], False))
        await asyncio.sleep(0)
        q.commit_all()
        (res,) = await asyncio.wait_for(second, 1)
        q.commit_all()
        assert res.error == ErrorCode.topic_already_exists, res
        assert [n for n, _ in _topic_records(q)] == ["t"]

    asyncio.run(main())


def test_two_concurrent_creates_of_one_name_one_wins() -> None:
    async def main() -> None:
        q = LaggingQuorum()
        c = _controller(q)
        a = asyncio.ensure_future(c.create_topics([TopicSpec("t")], False))
        b = asyncio.ensure_future(c.create_topics([TopicSpec("t")], False))
        await _until_appended(q, 2)
        for _ in range(5):
            await asyncio.sleep(0)
            q.commit_all()
        (ra,), (rb,) = await asyncio.wait_for(asyncio.gather(a, b), 1)
        assert sorted([ra.error, rb.error]) == sorted(
            [ErrorCode.none, ErrorCode.topic_already_exists]
        )
        assert len(_topic_records(q)) == 1

    asyncio.run(main())


def test_written_state_rolls_back_when_the_epoch_ends_uncommitted() -> None:
    async def main() -> None:
        q = LaggingQuorum()
        c = _controller(q)
        first = asyncio.ensure_future(c.create_topics([TopicSpec("t")], False))
        await _until_appended(q, 2)
        assert "t" in c.current_image().topics  # written, not committed
        assert "t" not in q.image.topics
        q.change_leader(regain=True)  # truncated: the topic never existed
        with pytest.raises(NotLeaderError):
            await first
        assert "t" not in c.current_image().topics
        (res,) = await asyncio.wait_for(_create_committing(q, c, "t"), 1)
        assert res.error == ErrorCode.none
        assert q.image.topics["t"].topic_id == res.topic_id

    asyncio.run(main())


async def _create_committing(q: LaggingQuorum, c: Controller, name: str) -> Any:
    task = asyncio.ensure_future(c.create_topics([TopicSpec(name)], False))
    for _ in range(20):
        await asyncio.sleep(0)
        q.commit_all()
        if task.done():
            break
    return await task


def test_written_state_follows_commits_and_epochs() -> None:
    committed = MetadataImage()
    epoch: list[int | None] = [3]
    ws = WrittenState(lambda: committed, lambda: epoch[0])
    tid = uuid.uuid4()
    assert ws.image() is committed
    ws.appended(3, 0, [TopicRecord(name="x", topic_id=tid)])
    assert ws.image().topics["x"].topic_id == tid and ws.pending == 1
    committed, _ = apply_records(committed, [(0, TopicRecord(name="x", topic_id=tid))])
    assert ws.image() is committed and ws.pending == 0  # caught up: the committed image again
    ws.appended(3, 1, [TopicRecord(name="y", topic_id=uuid.uuid4())])
    epoch[0] = None  # leadership lost before it committed
    assert "y" not in ws.image().topics and ws.pending == 0


class SoloQuorum(LaggingQuorum):
    """A quorum of one voter: the append itself commits and applies the batch."""

    def begin_append(self, records: Sequence[Any]) -> tuple[int, int]:
        epoch, last = super().begin_append(records)
        self.commit_all()
        return epoch, last


def test_a_batch_committed_within_its_append_is_not_pending() -> None:
    """A single-voter quorum commits as it appends: the written state must take the committed
    image as it is (every single-node cluster failed to start on the assertion before)."""
    q = SoloQuorum()
    c = _controller(q)

    async def go() -> None:
        await c.finalize_features({"metadata.version": 27, "group.version": 1})
        await c.register_broker([("PLAINTEXT", "localhost", 9092, 0)], None, {})
        results = await c.create_topics([TopicSpec("solo", 1, 1)], validate_only=False)
        assert results[0].error == ErrorCode.none

    asyncio.run(go())
    assert c.written.pending == 0
    assert q.image.features == {"metadata.version": 27, "group.version": 1}
    assert "solo" in q.image.topics
