"""The state machine of one `__mirror_state` partition: mirror partition states and LMEs.

Writes build their records and change nothing in memory; the change is applied by replaying the
records once they are durable (`on_commit`), so a failed append leaves the shard as it was and
replay is the single code path for both loading and writing.
"""

from collections.abc import Iterable

from broker.coordinator.mirror import records as rec
from broker.coordinator.mirror.records import MirrorKey
from broker.coordinator.record_framing import RecordFormatError
from broker.coordinator.runtime import (
    CoordinatorError,
    Record,
    ShardContext,
    WriteResult,
    append_error_code,
)
from broker.metadata.mirror_states import MirrorState, can_transition
from protocol.errors import MirrorErrorCode

StateEntry = tuple[MirrorKey, MirrorState, int | None]


class InvalidMirrorStateError(CoordinatorError):
    """A transition the KIP's state machine forbids (INVALID_MIRROR_STATES, 145)."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        # The runtime types codes as kio's ErrorCode, which has no KIP-1279 codes; both are
        # IntEnums, so the value (145) is what callers read and what goes on the wire.
        self.code = MirrorErrorCode.INVALID_MIRROR_STATES  # type: ignore[assignment]


class MirrorShard:
    def __init__(self, ctx: "ShardContext[MirrorShard]") -> None:
        self.ctx = ctx
        self.states: dict[MirrorKey, MirrorState] = {}
        self.epochs: dict[MirrorKey, int] = {}

    # -- replay -------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        decoded = rec.decode_key(key)
        if decoded is None:
            return
        record_type, k = decoded
        if record_type == rec.MIRROR_PARTITION_STATE:
            if value is None:
                self.states.pop(k, None)
            else:
                code = rec.decode_state_value(value)
                try:
                    self.states[k] = MirrorState(code)
                except ValueError:
                    raise RecordFormatError(f"unknown mirror state {code}") from None
        elif value is None:
            self.epochs.pop(k, None)
        else:
            self.epochs[k] = rec.decode_epoch_value(value)

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        self.states.clear()
        self.epochs.clear()

    # -- reads --------------------------------------------------------------------------------

    def read(self, k: MirrorKey) -> tuple[MirrorState, int | None]:
        return self.states.get(k, MirrorState.UNKNOWN), self.epochs.get(k)

    def entries(self, mirror: str | None) -> list[StateEntry]:
        keys = self.states.keys() | self.epochs.keys()
        return [
            (k, self.states.get(k, MirrorState.UNKNOWN), self.epochs.get(k))
            for k in keys
            if mirror is None or k.mirror == mirror
        ]

    # -- writes -------------------------------------------------------------------------------

    def result_of(self, records: list[Record]) -> WriteResult[None]:
        def commit() -> None:
            for key, value in records:
                self.replay(key, value)

        def fail(exc: BaseException) -> None:
            # Nothing changed in memory yet: only report what the client should see.
            raise CoordinatorError(append_error_code(exc), str(exc)) from exc

        return WriteResult(None, records, on_commit=commit, on_failure=fail)

    def write(
        self, k: MirrorKey, new: MirrorState | None, epoch: int | None, label: str
    ) -> WriteResult[None]:
        """A state transition and/or an LME, in one append. The same state again is not
        rewritten (an idempotent retry); a forbidden transition writes nothing."""
        records: list[Record] = []
        if new is not None:
            old = self.states.get(k, MirrorState.UNKNOWN)
            if new != old or new == MirrorState.UNKNOWN:
                if not can_transition(old, new):
                    raise InvalidMirrorStateError(
                        f"cannot move {label} of mirror {k.mirror} from {old.name} to {new.name}"
                    )
                records.append((rec.state_key(k), rec.state_value(new)))
        if epoch is not None and self.epochs.get(k) != epoch:
            records.append((rec.epoch_key(k), rec.epoch_value(epoch)))
        return self.result_of(records) if records else WriteResult(None)

    def delete(self, keys: Iterable[MirrorKey]) -> WriteResult[None]:
        """Tombstones for both records of each key this shard holds anything for."""
        records: list[Record] = []
        for k in keys:
            if k in self.states:
                records.append((rec.state_key(k), None))
            if k in self.epochs:
                records.append((rec.epoch_key(k), None))
        return self.result_of(records) if records else WriteResult(None)
