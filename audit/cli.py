"""kafka-mirror-audit: command line, exit codes, and the order of the steps.

Exit codes: 0 every partition IDENTICAL or LAGGING; 2 any DIVERGED or MISSING; 1 a usage or
input error (the message names the flag or path), or no usable Java/pyspark.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from .discover import InputError
from .job import DEFAULT_SPLIT_BYTES, AuditConfig, plan, run_audit
from .output import report_document, write_json, write_parquet
from .report import console_summary, write_html
from .session import EnvironmentProblem, check_java, start_session

PROG = "kafka-mirror-audit"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{PROG}: error: {message}", file=sys.stderr)
        raise SystemExit(1)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kafka-mirror-audit.sh",
        description="Prove a mirror complete and identical from segment files (or "
        "kafka-dump-log output) of the source and destination clusters; chart its lag.",
    )
    p.add_argument(
        "--source", required=True, metavar="DIR", help="source cluster's dumped log dirs"
    )
    p.add_argument(
        "--destination", required=True, metavar="DIR", help="destination cluster's dumped log dirs"
    )
    p.add_argument("--output", required=True, metavar="DIR", help="where reports are written")
    p.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    p.add_argument(
        "--topics",
        metavar="REGEX",
        help="audit topics whose whole name matches (default: all but internal '__' topics)",
    )
    p.add_argument(
        "--split-mb",
        type=int,
        default=DEFAULT_SPLIT_BYTES >> 20,
        metavar="N",
        help="byte range per scan task, in MiB (default %(default)s)",
    )
    p.add_argument(
        "--no-verify-crc",
        action="store_true",
        help="compare headers only; skip recomputing each batch's CRC (misses payload damage)",
    )
    return p


def _check_output(path: str) -> None:
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"--output {path}: exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--output {path}: cannot create it: {exc.strerror}") from exc
    if not os.access(path, os.W_OK):
        raise InputError(f"--output {path}: not writable")


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.split_mb <= 0:
        parser().error(f"--split-mb {args.split_mb}: must be a positive number of MiB")
    cfg = AuditConfig(
        source=args.source,
        destination=args.destination,
        output=args.output,
        master=args.master,
        topics=args.topics,
        split_bytes=args.split_mb << 20,
        verify_crc=not args.no_verify_crc,
    )
    try:
        tasks = plan(cfg)  # input errors surface before the JVM starts
        _check_output(cfg.output)
        check_java()
        spark = start_session(cfg.master)
    except (InputError, EnvironmentProblem) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    try:
        result = run_audit(spark, cfg, tasks)
        doc = report_document(cfg, result)
        write_parquet(spark, result, cfg.output)
        write_json(doc, cfg.output)
        write_html(doc, result.reports, cfg.output)
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    console_summary(result.reports, result.counts(), sys.stdout)
    print(f"reports in {os.path.abspath(cfg.output)} (report.html, report.json, *.parquet)")
    return result.exit_code
