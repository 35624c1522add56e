"""Write the audit's results: Parquet (through Spark) and JSON (one document)."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from .job import AuditConfig, AuditResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


def _schemas() -> tuple[StructType, StructType]:
    from pyspark.sql.types import (
        ArrayType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    def longs(*names: str) -> list[StructField]:
        return [StructField(n, LongType()) for n in names]

    epochs = ArrayType(StructType(longs("epoch", "start_offset")))
    gaps = ArrayType(StructType(longs("first", "last")))
    txns = ArrayType(StructType(longs("producer_id", "producer_epoch", "first_offset")))
    markers = ArrayType(
        StructType([*longs("offset", "epoch"), StructField("source_cluster_id", StringType())])
    )
    side: list[StructField] = []
    for s in ("source", "destination"):
        side += [
            StructField(f"{s}_copies", ArrayType(StringType())),
            *longs(f"{s}_log_start", f"{s}_log_end", f"{s}_batches", f"{s}_records"),
            *longs(f"{s}_bytes", f"{s}_max_timestamp"),
        ]
    per_side: list[StructField] = []
    for s in ("source", "destination"):
        per_side += [
            StructField(f"{s}_epochs", epochs),
            *longs(f"{s}_gap_count", f"{s}_gap_offsets"),
            StructField(f"{s}_gaps", gaps),
        ]
    partitions = StructType(
        [
            StructField("topic", StringType(), False),
            StructField("partition", IntegerType(), False),
            StructField("verdict", StringType(), False),
            StructField("missing_side", StringType()),
            StructField("reason", StringType()),
            *side,
            *longs("lag_offsets", "lag_batches", "lag_records", "lag_bytes", "lag_ms"),
            *longs("matched_batches", "missing_batches", "extra_batches", "different_batches"),
            *longs("first_divergent_offset"),
            *longs("source_only_head_batches", "destination_only_head_batches"),
            *longs("diverged_epoch_source", "diverged_epoch_destination"),
            *per_side,
            StructField("source_open_transactions", txns),
            StructField("destination_open_transactions", txns),
            StructField("source_markers", markers),
            StructField("destination_markers", markers),
            *longs("failover_offset", "post_failover_batches"),
            *longs("source_crc_invalid", "destination_crc_invalid"),
            *longs("source_copy_conflicts", "destination_copy_conflicts"),
            StructField("problems", ArrayType(StringType())),
        ]
    )
    differences = StructType(
        [
            StructField("topic", StringType(), False),
            StructField("partition", IntegerType(), False),
            StructField("kind", StringType(), False),
            *longs("base_offset", "last_offset"),
            StructField("fields", ArrayType(StringType())),
            *longs("source_crc", "destination_crc", "source_epoch", "destination_epoch"),
            *longs("source_size", "destination_size"),
        ]
    )
    return partitions, differences


def write_parquet(spark: SparkSession, result: AuditResult, out_dir: str) -> None:
    partitions_schema, diffs_schema = _schemas()
    rows = [r.to_dict() for r in result.reports]
    ordered = [[row[f.name] for f in partitions_schema.fields] for row in rows]
    spark.createDataFrame(ordered, partitions_schema).coalesce(1).write.mode("overwrite").parquet(
        os.path.join(out_dir, "partitions.parquet")
    )
    diff_rows = [[d[f.name] for f in diffs_schema.fields] for d in result.differences]
    spark.createDataFrame(diff_rows, diffs_schema).coalesce(1).write.mode("overwrite").parquet(
        os.path.join(out_dir, "differences.parquet")
    )


def report_document(cfg: AuditConfig, result: AuditResult) -> dict[str, Any]:
    return {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source": os.path.abspath(cfg.source),
        "destination": os.path.abspath(cfg.destination),
        "topics": cfg.topics,
        "exit_code": result.exit_code,
        "verdicts": result.counts(),
        "tasks": result.tasks,
        "bytes_scanned": result.bytes_scanned,
        "partitions": [r.to_dict() for r in result.reports],
        "differences": result.differences,
    }


def write_json(doc: dict[str, Any], out_dir: str) -> str:
    path = os.path.join(out_dir, "report.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    return path
