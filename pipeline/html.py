"""The HTML rebalance report: headline figures, six plots, per-type, top-N and per-day tables.

Works only on the small summary the driver collected (see `rebalance_report.write`). PNGs
(matplotlib, Agg backend) are written to `plots/` beside `report.html` and embedded in it as data
URIs, so the HTML file alone is complete: no script, no external resource, nothing for a browser to
fail on. The plots, in reading order: rebalances over time (per type, with members fenced), time to
Stable (p50/p95/max), partitions moved, partition unavailability (p50/p95), the noisiest group
lifetimes, and the distribution of rebalance times.
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

TYPE_COLORS = {"classic": "tab:blue", "consumer": "tab:orange"}
PLOTS = 6


def _png(fig: Any, path: Path) -> str:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    data = buffer.getvalue()
    path.write_bytes(data)
    return base64.b64encode(data).decode()


def _nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _by_type(summary: dict[str, Any], key: str, days: list[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    index = {d: i for i, d in enumerate(days)}
    for row in summary["daily_by_type"]:
        series = out.setdefault(row["group_type"] or "unknown", [0.0] * len(days))
        series[index[row["day"]]] = float(row[key] or 0)
    return dict(sorted(out.items()))


def _stacked(ax: Any, days: list[str], series: dict[str, list[float]]) -> None:
    bottom = [0.0] * len(days)
    for group_type, values in series.items():
        ax.bar(days, values, bottom=bottom, label=group_type, color=TYPE_COLORS.get(group_type, "tab:gray"))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]


def _plots(summary: dict[str, Any], directory: Path) -> list[tuple[str, str, str]]:
    """(title, file name, base64 PNG) of each plot."""
    directory.mkdir(parents=True, exist_ok=True)
    daily = summary["daily"]
    days = [d["day"] for d in daily]
    out: list[tuple[str, str, str]] = []

    def add(title: str, name: str, fig: Any) -> None:
        out.append((title, name, _png(fig, directory / name)))

    fig, ax = plt.subplots(figsize=(6, 3.2))
    _stacked(ax, days, _by_type(summary, "rebalances", days))
    ax.plot(days, [d["members_fenced_session_timeout"] or 0 for d in daily], "o-", color="tab:red",
            label="members fenced (session timeout)")
    ax.set_ylabel("per day")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", rotation=30)
    add("Rebalances per day, by group type", "rebalances_per_day.png", fig)

    fig, ax = plt.subplots(figsize=(6, 3.2))
    for key, label in (("rebalance_p50_ms", "p50"), ("rebalance_p95_ms", "p95"), ("rebalance_max_ms", "max")):
        ax.plot(days, [_nan(d[key]) for d in daily], "o-", label=label)
    ax.set_yscale("symlog")
    ax.set_ylabel("ms from start to Stable")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", rotation=30)
    add("Time to Stable per day", "time_to_stable.png", fig)

    fig, ax = plt.subplots(figsize=(6, 3.2))
    _stacked(ax, days, _by_type(summary, "partitions_moved", days))
    ax.set_ylabel("partitions moved")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", rotation=30)
    add("Partitions moved per day, by group type", "partitions_moved.png", fig)

    fig, ax = plt.subplots(figsize=(6, 3.2))
    for key, label in (("unavailable_p50_ms", "p50"), ("unavailable_p95_ms", "p95"), ("unavailable_max_ms", "max")):
        ax.plot(days, [_nan(d.get(key)) for d in daily], "o-", label=label)
    ax.set_yscale("symlog")
    ax.set_ylabel("ms from revocation to assignment")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", rotation=30)
    add("Partition unavailability per day", "unavailability.png", fig)

    top = summary["top_groups"]
    fig, ax = plt.subplots(figsize=(6, 0.3 * max(len(top), 1) + 1.2))
    if top:
        ordered = list(reversed(top))
        ax.barh([f"{g['group_id']} ({g['group_type']})" for g in ordered], [g["rebalances"] for g in ordered],
                color=[TYPE_COLORS.get(g["group_type"], "tab:gray") for g in ordered])
        ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("rebalances")
    add("Noisiest groups", "noisiest_groups.png", fig)

    histogram = summary["duration_histogram"]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar([f">={h['from_ms']}" for h in histogram], [h["count"] for h in histogram])
    ax.set_xlabel("time to Stable (ms)")
    ax.set_ylabel("rebalances")
    ax.tick_params(axis="x", rotation=45, labelsize=8)
    add("Distribution of rebalance times", "rebalance_time_histogram.png", fig)
    assert len(out) == PLOTS
    return out


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c)
            text = ("" if value is None else f"{value:,.0f}" if isinstance(value, float)
                    else f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value))
            cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1300px;color:#222}
h1{margin:0 0 .2em}h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.5em 0;font-size:85%}td,th{border:1px solid #ccc;padding:2px 7px;text-align:right}
th{background:#f4f4f4}td:first-child{text-align:left}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(400px,1fr));gap:12px}
figure{margin:0;border:1px solid #eee;padding:4px}figcaption{font-weight:600;font-size:90%;margin-bottom:2px}
img{width:100%;height:auto}.note{color:#555;font-size:85%}
.kpi{display:flex;gap:12px;flex-wrap:wrap}.kpi div{border:1px solid #ddd;padding:6px 12px;border-radius:4px}
.kpi b{display:block;font-size:1.4em}"""

KPIS = (("rebalances", "rebalances"), ("rebalances_completed", "completed"), ("partitions_moved", "partitions moved"),
        ("unavailable_ms_total", "ms partitions unavailable"), ("members_fenced_session_timeout", "members fenced"),
        ("group_type_changes", "group type changes"))


def render(output: Path, title: str, summary: dict[str, Any]) -> Path:
    plots = _plots(summary, output / "plots")
    totals = summary["totals"]
    kpis = "".join(f"<div><b>{totals.get(k) or 0:,}</b>{html.escape(label)}</div>" for k, label in KPIS)
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        "<link rel='icon' href='data:,'>",  # no favicon request (a 404 would be a console error)
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<p>{summary['groups']:,} groups over {summary['days']} day(s) (UTC).</p><div class='kpi'>{kpis}</div>",
        "<div class='grid'>",
    ]
    for plot_title, name, data in plots:
        parts.append(f"<figure><figcaption>{html.escape(plot_title)}</figcaption><img alt='{html.escape(plot_title)}' "
                     f"src='data:image/png;base64,{data}' data-file='plots/{name}'></figure>")
    parts.append("</div>")
    parts.append("<p class='note'>A rebalance runs from its first start (classic: PreparingRebalance; consumer: "
                 "group epoch bump) to the group being Stable (or Empty). Partition unavailability is the time "
                 "from a partition's revocation to its next assignment. A group that changed type counts as one "
                 "lifetime per type. Percentiles are nearest-rank.</p>")
    parts.append("<h2>Per group type</h2>")
    parts.append(_table(summary["by_type"], ["group_type", "groups", "rebalances", "rebalances_completed",
                                             "rebalance_p50_ms", "rebalance_p95_ms", "rebalance_max_ms",
                                             "partitions_moved", "unavailable_ms_total",
                                             "members_fenced_session_timeout", "group_type_changes"]))
    parts.append("<h2>Noisiest groups</h2>")
    parts.append(_table(summary["top_groups"], ["group_id", "group_type", "rebalances", "partitions_moved",
                                                "unavailable_ms_total", "members_fenced_session_timeout",
                                                "rebalance_max_ms"]))
    parts.append("<h2>Per day</h2>")
    parts.append(_table(summary["daily"], ["day", "groups", "rebalances", "rebalances_completed", "rebalance_p50_ms",
                                           "rebalance_p95_ms", "rebalance_max_ms", "partitions_moved",
                                           "partitions_revoked", "unavailable_p50_ms", "unavailable_p95_ms",
                                           "members_joined", "members_left", "members_fenced_session_timeout",
                                           "group_type_changes"]))
    parts.append("<p class='note'>Tables (Parquet, partitioned by day): tables/group_day, tables/episodes, "
                 "tables/partition_unavailability, tables/daily, tables/daily_by_type.</p></body></html>")
    path = output / "report.html"
    path.write_text("".join(parts))
    return path
