"""Human-facing output: the console summary, the HTML report and a lag chart per topic."""

from __future__ import annotations

import html
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from .compare import PartitionReport, Verdict

_COLOURS = {
    Verdict.IDENTICAL.value: (46, 139, 87),
    Verdict.LAGGING.value: (230, 145, 30),
    Verdict.DIVERGED.value: (200, 40, 40),
    Verdict.MISSING.value: (130, 130, 130),
}
MAX_CONSOLE_ROWS = 200


def _cell(value: Any) -> str:
    return "-" if value is None or value == -1 else str(value)


def console_summary(
    reports: Sequence[PartitionReport], counts: dict[str, int], out: TextIO
) -> None:
    parts = ", ".join(f"{n} {v}" for v, n in counts.items())
    print(f"kafka-mirror-audit: {len(reports)} partitions: {parts}", file=out)
    rows = list(reports)
    if len(rows) > MAX_CONSOLE_ROWS:
        rows = [r for r in rows if r.verdict != Verdict.IDENTICAL.value][:MAX_CONSOLE_ROWS]
        print(f"(showing the {len(rows)} partitions that are not IDENTICAL)", file=out)
    header = (
        "partition",
        "verdict",
        "src end",
        "dst end",
        "lag rec",
        "lag bytes",
        "lag ms",
        "diverges at",
    )
    table = [header] + [
        (
            f"{r.topic}-{r.partition}",
            r.verdict,
            _cell(r.source_log_end),
            _cell(r.destination_log_end),
            str(r.lag_records),
            str(r.lag_bytes),
            _cell(r.lag_ms),
            _cell(r.first_divergent_offset),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
    for r in rows:
        if r.reason and r.verdict != Verdict.LAGGING.value:
            print(f"{r.topic}-{r.partition}: {r.reason}", file=out)


def lag_chart(topic: str, reports: Sequence[PartitionReport], path: str) -> bool:
    """Bars: lag in records per partition (coloured by verdict); dots: lag in ms."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        return False
    n = len(reports)
    bar = max(2, min(40, 1600 // max(n, 1)))
    left, right, top, bottom = 80, 80, 30, 40
    width = left + right + n * bar
    height = 300
    img = Image.new("RGB", (max(width, 440), height), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default()
    plot_h = height - top - bottom
    max_rec = max((r.lag_records for r in reports), default=0) or 1
    max_ms = max((r.lag_ms or 0 for r in reports), default=0) or 1
    base_y = top + plot_h
    draw.line([(left, top), (left, base_y), (left + n * bar, base_y)], fill="black")
    draw.text((4, 6), f"{topic}: lag per partition", fill="black", font=font)
    draw.text((4, top), f"{max_rec} rec", fill="black", font=font)
    draw.text((left + n * bar + 6, top), f"{max_ms} ms", fill=(30, 60, 200), font=font)
    step = max(1, n // 20)
    for k, r in enumerate(reports):
        x0 = left + k * bar
        h = int(plot_h * r.lag_records / max_rec)
        colour = _COLOURS.get(r.verdict, (0, 0, 0))
        draw.rectangle([x0 + 1, base_y - max(h, 2), x0 + bar - 1, base_y], fill=colour)
        if r.lag_ms is not None and r.lag_ms > 0:
            y = base_y - int(plot_h * r.lag_ms / max_ms)
            cx = x0 + bar // 2
            draw.ellipse([cx - 3, y - 3, cx + 3, y + 3], fill=(30, 60, 200))
        if k % step == 0:
            draw.text((x0 + 1, base_y + 4), str(r.partition), fill="black", font=font)
    legend_x = left
    for verdict, colour in _COLOURS.items():
        draw.rectangle([legend_x, height - 14, legend_x + 8, height - 6], fill=colour)
        draw.text((legend_x + 11, height - 17), verdict, fill="black", font=font)
        legend_x += 88
    img.save(path, "PNG")
    return True


_COLUMNS: tuple[tuple[str, Callable[[PartitionReport], object]], ...] = (
    ("partition", lambda r: r.partition),
    ("verdict", lambda r: r.verdict),
    ("source start-end", lambda r: f"{_cell(r.source_log_start)}-{_cell(r.source_log_end)}"),
    (
        "destination start-end",
        lambda r: f"{_cell(r.destination_log_start)}-{_cell(r.destination_log_end)}",
    ),
    ("lag records", lambda r: r.lag_records),
    ("lag bytes", lambda r: r.lag_bytes),
    ("lag ms", lambda r: _cell(r.lag_ms)),
    (
        "missing / extra / different",
        lambda r: f"{r.missing_batches} / {r.extra_batches} / {r.different_batches}",
    ),
    ("diverges at", lambda r: _cell(r.first_divergent_offset)),
    ("gaps src / dst", lambda r: f"{r.source_gap_count} / {r.destination_gap_count}"),
    (
        "open txns src / dst",
        lambda r: f"{len(r.source_open_transactions)} / {len(r.destination_open_transactions)}",
    ),
    ("PID resets src / dst", lambda r: f"{len(r.source_markers)} / {len(r.destination_markers)}"),
    ("epochs src / dst", lambda r: f"{_epochs(r.source_epochs)} / {_epochs(r.destination_epochs)}"),
    ("note", lambda r: r.reason or ""),
)


def _epochs(entries: list[dict[str, int]]) -> str:
    shown = ", ".join(f"{e['epoch']}@{e['start_offset']}" for e in entries[:6])
    return shown + (" ..." if len(entries) > 6 else "")


def write_html(doc: dict[str, Any], reports: Sequence[PartitionReport], out_dir: str) -> str:
    by_topic: dict[str, list[PartitionReport]] = defaultdict(list)
    for r in reports:
        by_topic[r.topic].append(r)
    charts_dir = os.path.join(out_dir, "charts")
    os.makedirs(charts_dir, exist_ok=True)
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Mirror audit</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}"
        ".IDENTICAL{color:#2e8b57}.LAGGING{color:#e6911e}.DIVERGED{color:#c82828}"
        ".MISSING{color:#828282}</style></head><body>",
        "<h1>Mirror audit</h1>",
        f"<p>source <code>{e(doc['source'])}</code><br>destination "
        f"<code>{e(doc['destination'])}</code><br>generated {e(doc['generated_at'])}</p>",
        "<p>"
        + ", ".join(f"<b class='{v}'>{n} {v}</b>" for v, n in doc["verdicts"].items())
        + "</p>",
    ]
    for topic in sorted(by_topic):
        rows = by_topic[topic]
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in topic)
        png = os.path.join(charts_dir, f"{safe}.png")
        parts.append(f"<h2>{e(topic)}</h2>")
        if lag_chart(topic, rows, png):
            parts.append(f"<img src='charts/{e(safe)}.png' alt='lag of {e(topic)}'>")
        parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c, _ in _COLUMNS) + "</tr>")
        for r in rows:
            cells = "".join(f"<td>{e(str(fn(r)))}</td>" for _, fn in _COLUMNS)
            parts.append(f"<tr class='{e(r.verdict)}'>{cells}</tr>")
        parts.append("</table>")
        problems = [p for r in rows for p in r.problems]
        if problems:
            parts.append("<ul>" + "".join(f"<li>{e(p)}</li>" for p in problems[:100]) + "</ul>")
    diffs = doc["differences"]
    if diffs:
        parts.append(f"<h2>Differing batches (first {min(len(diffs), 500)} of {len(diffs)})</h2>")
        keys = ["topic", "partition", "kind", "base_offset", "last_offset", "fields"]
        parts.append("<table><tr>" + "".join(f"<th>{k}</th>" for k in keys) + "</tr>")
        for d in diffs[:500]:
            parts.append("<tr>" + "".join(f"<td>{e(str(d[k]))}</td>" for k in keys) + "</tr>")
        parts.append("</table>")
    parts.append("</body></html>\n")
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(parts))
    return path
