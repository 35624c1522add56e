"""Read the text Apache Kafka's ``kafka-dump-log.sh --files ...`` prints, into canonical records.

One line per batch (``baseOffset: ... isvalid: true``), under a ``Dumping <path>`` line whose
path names the partition (``.../<topic>-<partition>/<base offset>.log``) and the log dir (the
directory above it), which tells node copies apart. Record lines (``| offset: ...``, printed
with ``--deep-iteration``) are only read to identify control records. Lines of any other kind
are skipped, so older and newer tool versions both parse.

Without record lines, a non-transactional control batch is taken to be a MIRROR_PID_RESET
marker: in a data partition no other control type is written without the transactional bit
(KRaft control records live in ``__cluster_metadata``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Final

from protocol.records.batch import LOG_OVERHEAD

from .records import MIRROR_PID_RESET, NOT_CONTROL, RECORD, UNKNOWN_CONTROL

PARTITION_DIR: Final = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_PAIR = re.compile(r"(\w+): (\S+)")
_CODECS: Final = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_REQUIRED: Final = ("baseOffset", "lastOffset", "count", "size", "crc")
_CONTROL_ID = re.compile(r"controlType: \S*?\((\d+)\)")
_CLUSTER_ID = re.compile(r"mirrorPidReset: sourceClusterId: (\S+)")


class DumpFormatError(ValueError):
    """A batch line lacks a field the audit needs."""


@dataclass
class DumpSection:
    """The batches printed for one segment file."""

    topic: str
    partition: int
    log_dir: str
    segment_base: int
    index: int  # order of the section in its dump
    records: bytearray = field(default_factory=bytearray)
    cluster_ids: dict[int, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _bool(value: str | None) -> bool:
    return value is not None and value.lower() == "true"


def _int(fields: dict[str, str], key: str, default: int) -> int:
    value = fields.get(key)
    return default if value is None else int(value)


def _attributes(fields: dict[str, str]) -> int:
    codec = fields.get("compresscodec", "none").lower()
    attrs = _CODECS.get(codec, 0)
    if "LogAppendTime" in fields:
        attrs |= 0x08
    if _bool(fields.get("isTransactional")):
        attrs |= 0x10
    if _bool(fields.get("isControl")):
        attrs |= 0x20
    horizon = fields.get("deleteHorizonMs", "OptionalLong.empty")
    if horizon != "OptionalLong.empty":
        attrs |= 0x40
    return attrs


class _Pending:
    """A batch line waiting for its record lines (which may name a control type)."""

    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields
        self.control_id: int | None = None
        self.cluster_id: str | None = None

    def pack(self, section: DumpSection) -> None:
        f = self.fields
        base = int(f["baseOffset"])
        attrs = _attributes(f)
        if not attrs & 0x20:
            ctype = NOT_CONTROL
        elif attrs & 0x10:
            ctype = UNKNOWN_CONTROL  # a transaction marker; COMMIT or ABORT is not compared
        elif self.control_id is None or self.control_id == MIRROR_PID_RESET:
            ctype = MIRROR_PID_RESET
        else:
            ctype = UNKNOWN_CONTROL
        if ctype == MIRROR_PID_RESET and self.cluster_id is not None:
            section.cluster_ids[base] = self.cluster_id
        max_ts = f.get("CreateTime", f.get("LogAppendTime", "-1"))
        section.records += RECORD.pack(
            base,
            int(f["size"]) - LOG_OVERHEAD,
            _int(f, "partitionLeaderEpoch", -1),
            _int(f, "magic", 2),
            int(f["crc"]) & 0xFFFFFFFF,
            attrs,
            int(f["lastOffset"]) - base,
            int(max_ts),
            _int(f, "producerId", -1),
            _int(f, "producerEpoch", -1),
            _int(f, "baseSequence", -1),
            int(f["count"]),
            0 if f.get("isvalid", "true").lower() == "false" else 1,
            ctype,
        )


def _section_for(path_text: str, index: int) -> DumpSection | None:
    path = PurePosixPath(path_text.strip().replace("\\", "/"))
    if path.suffix != ".log":
        return None  # index files and the like: their lines are not batches
    match = PARTITION_DIR.match(path.parent.name)
    if match is None or not path.stem.isdigit():
        return None
    return DumpSection(
        topic=match["topic"],
        partition=int(match["partition"]),
        log_dir=str(path.parent.parent),
        segment_base=int(path.stem),
        index=index,
    )


def parse_dump(lines: Iterable[str], where: str = "dump") -> Iterator[DumpSection]:
    """Yield one section per ``Dumping <segment>.log`` block, in order."""
    section: DumpSection | None = None
    pending: _Pending | None = None
    index = 0
    dumping: str | None = None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if line.startswith("Dumping "):
            if pending is not None and section is not None:
                pending.pack(section)
            pending = None
            if section is not None:
                yield section
            dumping = line[len("Dumping ") :]
            section = _section_for(dumping, index)
            index += 1
        elif line.startswith("baseOffset:"):
            if pending is not None and section is not None:
                pending.pack(section)
            fields = dict(_PAIR.findall(line))
            missing = [k for k in _REQUIRED if k not in fields]
            if missing:
                raise DumpFormatError(
                    f"{where}:{number}: batch line lacks {', '.join(missing)}: {line[:120]}"
                )
            if section is None:
                # Only the "Dumping" path says which partition (and copy) a batch is of.
                raise DumpFormatError(
                    f"{where}:{number}: batch line not under a 'Dumping "
                    f".../<topic>-<partition>/<offset>.log' line (last: {dumping!r})"
                )
            pending = _Pending(fields)
        elif pending is not None and line.startswith("|"):
            if pending.control_id is None:
                if "endTxnMarker:" in line:
                    pending.control_id = 0
                elif (m := _CLUSTER_ID.search(line)) is not None:
                    pending.control_id = MIRROR_PID_RESET
                    pending.cluster_id = m[1]
                elif (m := _CONTROL_ID.search(line)) is not None:
                    pending.control_id = int(m[1])
        elif line.startswith("Found ") and "invalid bytes" in line and section is not None:
            section.problems.append(f"{where}:{number}: {line}")
    if pending is not None and section is not None:
        pending.pack(section)
    if section is not None:
        yield section
