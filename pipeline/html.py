"""The HTML rebalance report: summary, daily and top-N tables, and plots (matplotlib, Agg backend).

Works only on the small results the driver collected (see `rebalance_report.write`). PNGs are
written to `plots/` beside `report.html` and embedded in it, so the HTML file alone is complete.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt


def _png(fig: Any, path: Path) -> str:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    data = buffer.getvalue()
    path.write_bytes(data)
    return base64.b64encode(data).decode()


def _plots(summary: dict[str, Any], directory: Path) -> list[tuple[str, str, str]]:
    """(title, file name, base64 PNG) of each plot."""
    directory.mkdir(parents=True, exist_ok=True)
    daily = summary["daily"]
    days = [d["day"] for d in daily]
    out: list[tuple[str, str, str]] = []

    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.bar(days, [d["rebalances"] or 0 for d in daily], label="rebalances")
    ax.plot(days, [d["members_fenced_session_timeout"] or 0 for d in daily], "o-", color="tab:red",
            label="members fenced (session timeout)")
    ax.set_ylabel("count per day")
    ax.legend()
    ax.tick_params(axis="x", rotation=30)
    out.append(("Rebalances and fenced members per day", "rebalances_per_day.png",
                _png(fig, directory / "rebalances_per_day.png")))

    fig, ax = plt.subplots(figsize=(8, 3.5))
    for key, label in (("rebalance_p50_ms", "p50"), ("rebalance_p95_ms", "p95"), ("rebalance_max_ms", "max")):
        ax.plot(days, [d[key] if d[key] is not None else float("nan") for d in daily], "o-", label=label)
    ax.set_yscale("symlog")
    ax.set_ylabel("rebalance time (ms)")
    ax.legend()
    ax.tick_params(axis="x", rotation=30)
    out.append(("Rebalance time per day (start to Stable)", "rebalance_time_per_day.png",
                _png(fig, directory / "rebalance_time_per_day.png")))

    fig, ax1 = plt.subplots(figsize=(8, 3.5))
    ax1.bar(days, [d["partitions_moved"] or 0 for d in daily], color="tab:green", label="partitions moved")
    ax1.set_ylabel("partitions moved")
    ax2 = ax1.twinx()
    for key, label in (("unavailable_p50_ms", "unavailable p50"), ("unavailable_p95_ms", "unavailable p95")):
        ax2.plot(days, [d[key] if d[key] is not None else float("nan") for d in daily], "o-", label=label)
    ax2.set_yscale("symlog")
    ax2.set_ylabel("partition unavailability (ms)")
    ax2.legend(loc="upper right")
    ax1.tick_params(axis="x", rotation=30)
    out.append(("Partitions moved and partition unavailability per day", "partitions_per_day.png",
                _png(fig, directory / "partitions_per_day.png")))

    top = summary["top_groups"]
    if top:
        fig, ax = plt.subplots(figsize=(8, 0.4 * len(top) + 1.2))
        names = [g["group_id"] for g in reversed(top)]
        ax.barh(names, [g["rebalances"] for g in reversed(top)])
        ax.set_xlabel("rebalances")
        out.append(("Noisiest groups", "top_groups.png", _png(fig, directory / "top_groups.png")))

    histogram = summary["duration_histogram"]
    if histogram:
        fig, ax = plt.subplots(figsize=(8, 3.0))
        ax.bar([f">={h['from_ms']}" for h in histogram], [h["count"] for h in histogram])
        ax.set_xlabel("rebalance time (ms)")
        ax.set_ylabel("rebalances")
        out.append(("Distribution of rebalance times", "rebalance_time_histogram.png",
                    _png(fig, directory / "rebalance_time_histogram.png")))
    return out


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c)
            text = "" if value is None else f"{value:,.0f}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else str(value)
            cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse;margin:1em 0;font-size:90%}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td:first-child{text-align:left}img{max-width:100%;border:1px solid #eee}
.note{color:#555;font-size:90%}"""


def render(output: Path, title: str, summary: dict[str, Any]) -> Path:
    plots = _plots(summary, output / "plots")
    totals = summary["totals"]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<p>{summary['groups']:,} groups over {summary['days']} day(s) (UTC).</p>",
        _table([totals], list(totals)),
        "<p class='note'>A rebalance runs from its first start (classic: PreparingRebalance; consumer: group "
        "epoch bump) to the group being Stable (or Empty). Partition unavailability is the time from a "
        "partition's revocation to its next assignment. Percentiles are nearest-rank.</p>",
    ]
    for plot_title, name, data in plots:
        parts.append(f"<h2>{html.escape(plot_title)}</h2><img alt='{html.escape(plot_title)}' "
                     f"src='data:image/png;base64,{data}' data-file='plots/{name}'>")
    parts.append("<h2>Noisiest groups</h2>")
    parts.append(_table(summary["top_groups"], ["group_id", "group_type", "rebalances", "partitions_moved",
                                                "unavailable_ms_total", "members_fenced_session_timeout",
                                                "rebalance_max_ms"]))
    parts.append("<h2>Per day</h2>")
    parts.append(_table(summary["daily"], ["day", "groups", "rebalances", "rebalances_completed", "rebalance_p50_ms",
                                           "rebalance_p95_ms", "rebalance_max_ms", "partitions_moved",
                                           "partitions_revoked", "unavailable_p50_ms", "unavailable_p95_ms",
                                           "members_joined", "members_left", "members_fenced_session_timeout"]))
    parts.append("<p class='note'>Per-group tables: tables/group_day (Parquet), tables/episodes, "
                 "tables/partition_unavailability.</p></body></html>")
    path = output / "report.html"
    path.write_text("".join(parts))
    return path
