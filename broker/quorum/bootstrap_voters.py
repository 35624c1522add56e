"""What ``kafka-storage.sh format`` writes for a dynamic quorum (KIP-853), and how a node reads it.

A controller formatted ``--standalone`` or ``--initial-controllers id@host:port:directory-id,...``
gets the bootstrap snapshot ``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``
in its metadata log directory: a KRaftVersionRecord (kraft.version 1) and a VotersRecord with
the initial voters, as Kafka's formatter writes it. ``--no-initial-controllers`` writes the
KRaftVersionRecord only: the node joins an existing quorum as an observer, finding it through
``controller.quorum.bootstrap.servers``, and learns the voters from the log. The first leader
copies the bootstrap records into the log (``broker.raft.core``), so every replica reads them.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from protocol.records.kraft_control import encode_kraft_version

from ..config.listeners import Listener
from ..config.meta_properties import MetaPropertiesError, parse_uuid, uuid_to_str
from ..config.server_config import ServerConfig
from ..log.checkpoint import fsync_dir
from ..raft.messages import KRAFT_VERSION, KRAFT_VOTERS, SnapshotId
from ..raft.voter_set import VoterEndpoint, VoterEntry, VoterSet
from .metadata_log import snapshot_file_bytes, snapshot_name

METADATA_PARTITION_DIR = "__cluster_metadata-0"
BOOTSTRAP_SNAPSHOT = SnapshotId(0, 0)
KRAFT_VERSION_DYNAMIC = 1


class InitialControllersError(ValueError):
    """A bad --initial-controllers value, with Kafka's message."""


def parse_initial_controllers(text: str, listener_name: str) -> list[VoterEntry]:
    """``id@host:port:directory-id,...`` (Kafka's DynamicVoters.parse) as voters whose one
    endpoint is on ``listener_name``."""
    voters: list[VoterEntry] = []
    seen_ids: set[int] = set()
    seen_dirs: set[uuid.UUID] = set()
    for item in text.split(","):
        item = item.strip()
        at = item.find("@")
        if at < 0:
            raise InitialControllersError("No @ found in dynamic voter string.")
        try:
            node_id = int(item[:at])
        except ValueError:
            raise InitialControllersError(
                "Failed to parse node id in dynamic voter string."
            ) from None
        if node_id < 0:
            raise InitialControllersError(
                f"Invalid negative node id {node_id} in dynamic voter string."
            )
        rest = item[at + 1 :]
        if rest.startswith("["):
            close = rest.find("]")
            if close < 0:
                raise InitialControllersError(
                    "Hostname began with left bracket, but no right bracket was found."
                )
            host, rest = rest[1:close], rest[close + 1 :]
            if not rest.startswith(":"):
                raise InitialControllersError("Port number not found in dynamic voter string.")
            rest = rest[1:]
        else:
            colon = rest.find(":")
            if colon < 0:
                raise InitialControllersError("No colon following hostname could be found.")
            host, rest = rest[:colon], rest[colon + 1 :]
        colon = rest.find(":")
        if colon < 0:
            raise InitialControllersError("No colon following port could be found.")
        try:
            port = int(rest[:colon])
        except ValueError:
            raise InitialControllersError("Failed to parse port in dynamic voter string.") from None
        if not 0 <= port <= 65535:
            raise InitialControllersError(f"Invalid port {port} in dynamic voter string.")
        try:
            directory_id = uuid.UUID(bytes=parse_uuid(rest[colon + 1 :]))
        except MetaPropertiesError:
            raise InitialControllersError(
                "Failed to parse directory ID in dynamic voter string."
            ) from None
        if node_id in seen_ids:
            raise InitialControllersError(f"Node id {node_id} was specified more than once.")
        if directory_id in seen_dirs:
            raise InitialControllersError(
                f"Directory id {uuid_to_str(directory_id.bytes)} was specified more than once."
            )
        seen_ids.add(node_id)
        seen_dirs.add(directory_id)
        voters.append(
            VoterEntry(node_id, directory_id, (VoterEndpoint(listener_name, host, port),), 0, 1)
        )
    return voters


def controller_endpoints(cfg: ServerConfig) -> tuple[VoterEndpoint, ...]:
    """This controller's endpoints, one per controller listener (advertised where given)."""
    by_name: dict[str, Listener] = {x.name: x for x in cfg.listeners}
    for adv in cfg.advertised_listeners:
        by_name[adv.name] = adv
    out = []
    for name in cfg.controller_listener_names:
        lst = by_name.get(name)
        if lst is not None:
            out.append(VoterEndpoint(name, lst.host or "localhost", lst.port))
    return tuple(out)


def directory_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=parse_uuid(text))


def write_bootstrap_snapshot(metadata_log_dir: str | Path, voters: VoterSet | None) -> Path:
    """The bootstrap snapshot (0, 0): kraft.version 1 and, unless None, the initial voters."""
    part_dir = Path(metadata_log_dir) / METADATA_PARTITION_DIR
    part_dir.mkdir(parents=True, exist_ok=True)
    control = [(KRAFT_VERSION, encode_kraft_version(KRAFT_VERSION_DYNAMIC))]
    if voters is not None:
        control.append((KRAFT_VOTERS, voters.encode()))
    raw = snapshot_file_bytes(BOOTSTRAP_SNAPSHOT, tuple(control), [], 0)
    final = part_dir / snapshot_name(BOOTSTRAP_SNAPSHOT)
    tmp = final.with_name(final.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fsync_dir(part_dir)
    return final


def has_bootstrap_snapshot(metadata_log_dir: str | Path) -> bool:
    return (
        Path(metadata_log_dir) / METADATA_PARTITION_DIR / snapshot_name(BOOTSTRAP_SNAPSHOT)
    ).exists()
