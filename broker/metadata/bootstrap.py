"""``bootstrap.checkpoint``: metadata records ``kafka-storage.sh format`` leaves in the metadata
log directory for the cluster's first active controller to write as its first records.

Today they are the SCRAM credentials of ``--add-scram`` (KIP-900), so that nodes can
authenticate to each other with SCRAM before any credential could be created through the
quorum. Until the cluster's metadata holds ``metadata.version`` (the bootstrap has not been
committed yet), a node accepts these credentials from its own file; afterwards only the
metadata's. The file holds `snapshot.encode_snapshot`'s state (offsets -1), not Kafka's bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from protocol.errors import DecodeError

from .snapshot import decode_snapshot, encode_snapshot

BOOTSTRAP_FILE: Final = "bootstrap.checkpoint"


class BootstrapError(ValueError):
    pass


def write_bootstrap(directory: str | Path, records: list[Any]) -> Path:
    """Write (atomically) the bootstrap records into ``directory``."""
    path = Path(directory) / BOOTSTRAP_FILE
    tmp = path.with_suffix(".checkpoint.tmp")
    with tmp.open("wb") as f:
        f.write(encode_snapshot([(-1, r) for r in records]))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return path


def read_bootstrap(directory: str | Path) -> list[Any]:
    """The bootstrap records of ``directory`` ([] without a file); BootstrapError when the
    file cannot be read."""
    path = Path(directory) / BOOTSTRAP_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise BootstrapError(f"{path}: cannot read: {e}") from None
    try:
        return [r for _, r in decode_snapshot(data)]
    except DecodeError as e:
        raise BootstrapError(f"{path}: not a bootstrap checkpoint: {e}") from None
