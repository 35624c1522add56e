"""Find the inputs of one side and cut them into scan tasks (runs on the driver; lists only).

Rule for a ``--source``/``--destination`` DIR: walk it; every directory named
``<topic>-<partition>`` holding ``<20-digit offset>.log`` files (or Kafka's partition metadata
files) is one copy of that partition, and the copy is named by the path of its parent (the
log dir) relative to DIR, ``.`` when DIR is itself the log dir or the partition dir. So DIR may
be one log dir, or hold one sub-directory per node (``node1/``, ``node2/``...), whose copies of
a partition are merged. Any other file whose first line starts with ``Dumping `` is read as
``kafka-dump-log.sh`` output. Kafka's ``-delete``/``-future`` directories do not match the
pattern and are skipped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from .scan_text import PARTITION_DIR
from .tasks import Kind, ScanTask, Side

SEGMENT_NAME: Final = re.compile(r"^\d{20}\.log$")
_PARTITION_FILES: Final = ("partition.metadata", "leader-epoch-checkpoint")
# Internal topics are not mirrored (the metadata log is per node); audited only when named.
DEFAULT_TOPICS: Final = re.compile(r"(?!__).*")


class InputError(ValueError):
    """Bad input; the message names the flag and path."""


def _is_dump(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return False
    return head.lstrip().startswith(b"Dumping ")


def _split(
    side: Side, topic: str, partition: int, copy: str, path: str, split_bytes: int
) -> list[ScanTask]:
    base = int(os.path.basename(path)[:20])
    size = os.path.getsize(path)
    return [
        ScanTask(
            side=side,
            kind=Kind.SEGMENT,
            path=path,
            copy=copy,
            topic=topic,
            partition=partition,
            segment_base=base,
            start=start,
            end=min(start + split_bytes, size),
        )
        for start in range(0, max(size, 1), split_bytes)
    ]


def discover(
    root: str, side: Side, topics: re.Pattern[str] | None, split_bytes: int
) -> list[ScanTask]:
    flag = f"--{side.value}"
    if not os.path.exists(root):
        raise InputError(f"{flag} {root}: no such directory")
    if not os.path.isdir(root):
        raise InputError(f"{flag} {root}: not a directory")
    pattern = DEFAULT_TOPICS if topics is None else topics
    root_path = Path(root).resolve()
    tasks: list[ScanTask] = []
    skipped = 0
    for dirpath, dirnames, filenames in os.walk(root_path, followlinks=True):
        dirnames.sort()
        here = Path(dirpath)
        match = PARTITION_DIR.match(here.name)
        logs = sorted(f for f in filenames if SEGMENT_NAME.match(f))
        if match and (logs or any(f in filenames for f in _PARTITION_FILES)):
            dirnames.clear()
            topic, partition = match["topic"], int(match["partition"])
            if not pattern.fullmatch(topic):
                skipped += 1
                continue
            copy = "." if here == root_path else str(here.parent.relative_to(root_path))
            if not logs:
                tasks.append(ScanTask(side, Kind.EMPTY, str(here), copy, topic, partition))
            for name in logs:
                tasks.extend(_split(side, topic, partition, copy, str(here / name), split_bytes))
            continue
        for name in sorted(filenames):
            path = here / name
            if not SEGMENT_NAME.match(name) and _is_dump(str(path)):
                copy = str(path.relative_to(root_path))
                tasks.append(ScanTask(side, Kind.DUMP, str(path), copy, topics=pattern.pattern))
    if not tasks:
        if skipped:
            raise InputError(f"{flag} {root}: no partition matches --topics {pattern.pattern!r}")
        raise InputError(
            f"{flag} {root}: holds no partition directory (<topic>-<partition>/"
            "<20-digit offset>.log) and no kafka-dump-log output"
        )
    return tasks
