"""kafka-dump-log: print segment files the way Kafka's DumpLogSegments does.

Usage: ``kafka-dump-log.sh --files a.log[,b.index,...] [--print-data-log] [--deep-iteration]``.
``.log`` files print one line per batch (and per record with deep iteration), ``.index`` and
``.timeindex`` and ``.txnindex`` files one line per entry. Output text matches Kafka's tool line for line
(control records of KIP-1279's MIRROR_PID_RESET type print ``mirrorPidReset: ...``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import datetime
import json
import mmap
import os
import re
import struct
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from protocol.errors import ProtocolError
from protocol.metadata_records import decode_metadata_record
from protocol.records import BatchView, ControlType, iter_records, parse_control_record
from protocol.records.batch import LOG_OVERHEAD, MAGIC_OFFSET, MIN_BATCH_LENGTH
from protocol.txn_index import decode_entries

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_HEAD = struct.Struct(">qi")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT_MAX = 2**31 - 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"kafka-dump-log: error: {message}", file=sys.stderr)
        raise SystemExit(1)


def _parser() -> _Parser:
    p = _Parser(
        prog="kafka-dump-log.sh",
        description="Parse a log file and dump its contents to the console, useful for "
        "debugging a seemingly corrupt log segment.",
    )
    p.add_argument(
        "--files",
        required=True,
        help="REQUIRED: The comma separated list of data and index log files to be dumped.",
    )
    p.add_argument("--print-data-log", action="store_true", help="Print the records' content.")
    p.add_argument(
        "--deep-iteration",
        action="store_true",
        help="Iterate records, not just batches (implied by --print-data-log).",
    )
    p.add_argument(
        "--skip-record-metadata",
        action="store_true",
        help="Skip printing metadata for each record.",
    )
    p.add_argument(
        "--cluster-metadata-decoder",
        action="store_true",
        help="Decode the records as KRaft metadata records (__cluster_metadata segments and "
        ".checkpoint snapshots); implies --print-data-log.",
    )
    p.add_argument(
        "--verify-index-only",
        action="store_true",
        help="Verify the index without printing its content.",
    )
    p.add_argument(
        "--max-bytes",
        type=int,
        default=_INT_MAX,
        help="Limit the amount of total batches read in bytes.",
    )
    return p


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _increment_sequence(seq: int, delta: int) -> int:
    if seq > _INT_MAX - delta:
        return delta - (_INT_MAX - seq) - 1
    return seq + delta


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _timestamp_type(view: BatchView) -> str:
    return "LogAppendTime" if view.timestamp_type == 1 else "CreateTime"


def batch_line(view: BatchView, position: int) -> str:
    base_seq = view.base_sequence
    last_seq = -1 if base_seq == -1 else _increment_sequence(base_seq, view.last_offset_delta)
    horizon = (
        f"OptionalLong[{view.base_timestamp}]" if view.has_delete_horizon else "OptionalLong.empty"
    )
    codec = _CODECS.get(view.compression, f"unknown({view.compression})")
    return (
        f"baseOffset: {view.base_offset} lastOffset: {view.last_offset} "
        f"count: {view.record_count} baseSequence: {base_seq} lastSequence: {last_seq} "
        f"producerId: {view.producer_id} producerEpoch: {view.producer_epoch} "
        f"partitionLeaderEpoch: {view.partition_leader_epoch} "
        f"isTransactional: {_bool(view.is_transactional)} isControl: {_bool(view.is_control)} "
        f"deleteHorizonMs: {horizon} position: {position} "
        f"{_timestamp_type(view)}: {view.max_timestamp} size: {view.size} magic: {view.magic} "
        f"compresscodec: {codec} crc: {view.crc} isvalid: {_bool(view.crc_ok())}"
    )


def _control_text(key: bytes | None, value: bytes | None) -> str:
    try:
        rec = parse_control_record(key, value)
    except ProtocolError as exc:
        return f" controlType: INVALID ({exc})"
    if rec.type in (ControlType.ABORT, ControlType.COMMIT):
        name = "COMMIT" if rec.type == ControlType.COMMIT else "ABORT"
        return f" endTxnMarker: {name} coordinatorEpoch: {rec.coordinator_epoch}"
    if rec.type == ControlType.MIRROR_PID_RESET:
        return f" mirrorPidReset: sourceClusterId: {rec.source_cluster_id}"
    if isinstance(rec.type, ControlType):
        return f" controlType: {rec.type.name}({int(rec.type)})"
    return f" controlType: UNKNOWN({rec.type})"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _shown(record: Any, f: dataclasses.Field[Any]) -> bool:
    """Kafka's JSON converters write a tagged field only when it is not its default."""
    return "tag" not in f.metadata or getattr(record, f.name) != f.default


def _json_value(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {
            _camel(f.name): _json_value(getattr(v, f.name))
            for f in dataclasses.fields(v)
            if _shown(v, f)
        }
    if isinstance(v, uuid.UUID):  # Kafka's Uuid.toString: URL-safe base64, no padding
        return base64.urlsafe_b64encode(v.bytes).rstrip(b"=").decode()
    if isinstance(v, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, datetime.timedelta):
        return int(v.total_seconds() * 1000)
    if isinstance(v, tuple | list):
        return [_json_value(x) for x in v]
    return v


def metadata_payload(value: bytes, offset: int) -> str:
    """A metadata record as Kafka's --cluster-metadata-decoder prints it (its words on error)."""
    try:
        record = decode_metadata_record(value)
    except (ProtocolError, ValueError, KeyError) as exc:
        return f"Error at {offset}, skipping. {exc}"
    kind = re.sub(r"(?<!^)(?=[A-Z])", "_", type(record).__name__).upper()
    body = {"type": kind, "version": int(type(record).__version__), "data": _json_value(record)}
    return json.dumps(body, separators=(",", ":"), default=str)


def record_lines(
    view: BatchView, print_data: bool, skip_metadata: bool, metadata: bool = False
) -> list[str]:
    lines = []
    ts_type = _timestamp_type(view)
    base_seq = view.base_sequence
    for rec in iter_records(view):
        prefix = "| "
        parts: list[str] = []
        if not skip_metadata:
            seq = -1 if base_seq < 0 else _increment_sequence(base_seq, rec.offset_delta)
            keys = ",".join(_text(k) for k, _ in rec.headers)
            parts.append(
                f"{prefix}offset: {rec.offset} {ts_type}: {rec.timestamp} "
                f"keySize: {-1 if rec.key is None else len(rec.key)} "
                f"valueSize: {-1 if rec.value is None else len(rec.value)} "
                f"sequence: {seq} headerKeys: [{keys}]"
            )
            prefix = " "
            if view.is_control:
                parts.append(_control_text(rec.key, rec.value))
        else:
            parts.append(prefix)
            prefix = ""
        if print_data and not view.is_control:
            if rec.key is not None:
                parts.append(f"{prefix}key: {_text(rec.key)}")
            if rec.value is not None:
                shown = (
                    metadata_payload(bytes(rec.value), rec.offset) if metadata else _text(rec.value)
                )
                parts.append(f" payload: {shown}")
        lines.append("".join(parts))
    return lines


def dump_log(
    path: Path,
    *,
    print_data: bool,
    deep: bool,
    skip_metadata: bool = False,
    max_bytes: int = _INT_MAX,
    metadata: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    stem = path.name.split(".")[0]
    if stem.isdigit():
        print(f"Log starting offset: {int(stem)}", file=out)
    data: bytes | mmap.mmap
    with path.open("rb") as fh:
        size = path.stat().st_size
        data = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) if size else b""
    try:
        limit = min(size, max_bytes)
        buf = memoryview(data)
        pos = 0
        last_offset = -1
        gaps: list[tuple[int, int]] = []
        while pos + LOG_OVERHEAD <= limit:
            _, length = _HEAD.unpack_from(buf, pos)
            if length < MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + length > limit:
                break
            if buf[pos + MAGIC_OFFSET] != 2:
                print(f"unsupported magic {buf[pos + MAGIC_OFFSET]} at position {pos}", file=err)
                break
            view = BatchView(buf, pos)
            print(batch_line(view, pos), file=out)
            if deep:
                try:
                    lines = record_lines(view, print_data, skip_metadata, metadata)
                except ProtocolError as exc:
                    print(f"cannot decode records of the batch at {pos}: {exc}", file=err)
                    lines = []
                for line in lines:
                    print(line, file=out)
                if lines and not skip_metadata:
                    first = view.base_offset
                    if last_offset != -1 and first != last_offset + 1:
                        gaps.append((last_offset, first))
                    last_offset = view.last_offset
            pos += view.size
            del view
        trailing = size - pos
        if trailing > 0 and max_bytes == _INT_MAX:
            print(f"Found {trailing} invalid bytes at the end of {path.name}", file=out)
        if gaps:
            print(f"Non-consecutive offsets in {path.absolute()}", file=err)
            for a, b in gaps:
                print(f"  {a} is followed by {b}", file=err)
        buf.release()
    finally:
        if isinstance(data, mmap.mmap):
            with contextlib.suppress(BufferError):
                data.close()


def _first_batch_last_offset(log_path: Path, position: int) -> int | None:
    try:
        with log_path.open("rb") as fh:
            fh.seek(position)
            head = fh.read(27)
    except OSError:
        return None
    if len(head) < 27:
        return None
    base = struct.unpack_from(">q", head, 0)[0]
    delta = struct.unpack_from(">i", head, 23)[0]
    return int(base + delta)


def dump_index(path: Path, *, verify_only: bool, out: TextIO, err: TextIO) -> None:
    base = int(path.name.split(".")[0])
    raw = path.read_bytes()
    n = len(raw) // _OFFSET_ENTRY.size
    if n == 0:
        print(f"{path} is empty.", file=out)
        return
    log_path = path.with_name(path.name.split(".")[0] + ".log")
    mismatches = []
    for i in range(n):
        rel, position = _OFFSET_ENTRY.unpack_from(raw, i * _OFFSET_ENTRY.size)
        offset = base + rel
        if offset == base and i > 0:
            break  # preallocated zeros after the last entry
        found = _first_batch_last_offset(log_path, position)
        if found is not None and found != offset:
            mismatches.append((offset, found))
        if not verify_only:
            print(f"offset: {offset} position: {position}", file=out)
    if mismatches:
        print(f"Mismatches in :{path.absolute()}", file=err)
        for a, b in mismatches:
            print(f"  Index offset: {a}, log offset: {b}", file=err)


def dump_time_index(path: Path, *, verify_only: bool, out: TextIO) -> None:
    base = int(path.name.split(".")[0])
    raw = path.read_bytes()
    for i in range(len(raw) // _TIME_ENTRY.size):
        ts, rel = _TIME_ENTRY.unpack_from(raw, i * _TIME_ENTRY.size)
        if rel == 0 and i > 0:
            break
        if not verify_only:
            print(f"timestamp: {ts} offset: {base + rel}", file=out)


def dump_txn_index(path: Path, *, out: TextIO) -> None:
    """The aborted transactions, as Kafka's tool prints them (a torn tail entry is skipped)."""
    for txn in decode_entries(path.read_bytes())[0]:
        print(
            f"version: {txn.version} producerId: {txn.producer_id} firstOffset: "
            f"{txn.first_offset} lastOffset: {txn.last_offset} lastStableOffset: "
            f"{txn.last_stable_offset}",
            file=out,
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    files = [f for f in args.files.split(",") if f]
    if not files:
        _parser().error("--files names no file")
    metadata = bool(args.cluster_metadata_decoder)
    print_data = bool(args.print_data_log) or metadata
    deep = bool(args.deep_iteration) or print_data
    status = 0
    for name in files:
        path = Path(name)
        print(f"Dumping {name}")
        suffix = path.suffix
        try:
            if suffix in (".log", ".checkpoint"):  # a KRaft snapshot is batches too
                dump_log(
                    path,
                    print_data=print_data,
                    deep=deep,
                    skip_metadata=args.skip_record_metadata,
                    max_bytes=args.max_bytes,
                    metadata=metadata,
                )
            elif suffix == ".index":
                dump_index(path, verify_only=args.verify_index_only, out=sys.stdout, err=sys.stderr)
            elif suffix == ".timeindex":
                dump_time_index(path, verify_only=args.verify_index_only, out=sys.stdout)
            elif suffix == ".txnindex":
                dump_txn_index(path, out=sys.stdout)
            else:
                print(f"Ignoring unknown file {name}", file=sys.stderr)
        except (OSError, ValueError, ProtocolError) as exc:
            print(f"cannot dump {name}: {exc}", file=sys.stderr)
            status = 1
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    try:
        code = main()
    except BrokenPipeError:
        # Output piped into head & co.: stop quietly, as a Unix tool should.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    raise SystemExit(code)
