"""The persisted election state (epoch, leader, vote) and Kafka's ``quorum-state`` file.

A node must never forget a vote it gave or an epoch it saw, or two leaders could be elected in
one epoch; so every durable transition of the core writes the election state before it acts
(sends a Vote, grants one, follows a leader). The file is Kafka's: one JSON line, written to
``quorum-state.tmp``, fsynced, renamed over ``quorum-state``, and the directory fsynced, e.g.

    {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1}],"data_version":0}

We write data_version 0 (static voters, as here) and read 0 and 1 (KIP-853's
``{"leaderId","leaderEpoch","votedId","votedDirectoryId","data_version":1}``).
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

FILE_NAME = "quorum-state"


class QuorumStateError(Exception):
    """The quorum-state file exists but cannot be used."""


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int
    leader_id: int = -1
    voted_id: int = -1
    voters: frozenset[int] = field(default_factory=frozenset)

    @property
    def has_leader(self) -> bool:
        return self.leader_id >= 0


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None:
        """Make ``state`` durable before returning."""
        ...


class MemoryQuorumStateStore:
    """Survives a simulated crash: the simulation keeps the object across restarts."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1


def encode(state: ElectionState, cluster_id: str = "") -> bytes:
    doc = {
        "clusterId": cluster_id,
        "leaderId": state.leader_id,
        "leaderEpoch": state.epoch,
        "votedId": state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": v} for v in sorted(state.voters)],
        "data_version": 0,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode(line: bytes) -> ElectionState:
    try:
        doc: Any = json.loads(line.decode().splitlines()[0])
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        raise QuorumStateError(f"unreadable quorum state: {e}") from e
    if not isinstance(doc, dict):
        raise QuorumStateError("quorum state is not a JSON object")
    version = doc.get("data_version")
    if version not in (0, 1):
        raise QuorumStateError(f"data_version {version!r} is not 0 or 1")
    try:
        voters = doc.get("currentVoters") or []
        return ElectionState(
            epoch=int(doc.get("leaderEpoch", -1)),
            leader_id=int(doc.get("leaderId", -1)),
            voted_id=int(doc.get("votedId", -1)),
            voters=frozenset(int(v["voterId"]) for v in voters),
        )
    except (TypeError, ValueError, KeyError) as e:
        raise QuorumStateError(f"bad quorum state field: {e}") from e


class FileQuorumStateStore:
    def __init__(self, path: Path, cluster_id: str = "") -> None:
        self.path = path
        self.cluster_id = cluster_id

    def read(self) -> ElectionState | None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        return decode(data)

    def write(self, state: ElectionState) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(encode(state, self.cluster_id))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
