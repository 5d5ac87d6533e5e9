"""Pictures and an HTML page of a DV health report (matplotlib, Agg backend: no display needed).

One PNG with three panels: the deleted ratio of every file with a DV (histogram, coloured by what
the recommendations do to the file: OPTIMIZE, PURGE or nothing), deleted rows per partition (the
partitions with the most, coloured the same way, each labelled with its deleted share and its
estimated read cost on the read path the report assumes), and live DVs / DV-deleted rows over
versions. The HTML page embeds the same PNG and the summary, recommendations and partition tables,
so it can be mailed or attached to a ticket as one file.
"""

from __future__ import annotations

import base64
import html
import io
from typing import TYPE_CHECKING, Any

import numpy as np

from dvlake.commands.inspection.health import HealthReport, human_bytes, records
from dvlake.display import percent

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_PARTITION_BARS = 25
#: Colours and legend names of what the recommendations do to a file or partition ('' = nothing to run).
ACTIONS = {"OPTIMIZE": ("#d1495b", "OPTIMIZE"), "REORG PURGE": ("#8e44ad", "PURGE"), "": ("#9aa5b1", "nothing to run")}
REC_COLUMNS = ["rank", "action", "partition", "rows reclaimed", "bytes reclaimed", "command", "sql", "why"]


def figure(report: HealthReport) -> Figure:
    """The three-panel figure of ``report``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter

    fig = Figure(figsize=(15, 4.8), layout="constrained")
    ax_hist, ax_part, ax_ver = fig.subplots(1, 3, width_ratios=[1, 1.15, 1])
    s = report.summary
    path = "native scan" if report.read_path.name == "native" else "pure-Python path"
    fig.suptitle(f"DV health of {report.table} at version {report.version}: {s['deleted_rows']:,} of "
                 f"{s['physical_rows']:,} rows deleted ({percent(s['deleted_ratio'])}) by {s['files_with_dv']:,} DVs "
                 f"in {s['files']:,} files; est. read overhead +{s['est_full_scan_overhead']:.0%} per full scan ({path})",
                 fontsize=11)

    # 1. histogram of the deleted ratio per file (files with a DV), stacked by what the recommendations do to it
    with_dv = report.files[report.files["has_dv"] & report.files["deleted_ratio"].notna()]
    bins = np.linspace(0, 1, 21)
    present = [a for a in ACTIONS if (with_dv["action"] == a).any()]
    if present:
        ax_hist.hist([with_dv.loc[with_dv["action"] == a, "deleted_ratio"].to_numpy() for a in present], bins=bins,
                     stacked=True, color=[ACTIONS[a][0] for a in present], label=[ACTIONS[a][1] for a in present],
                     edgecolor="white")
        ax_hist.legend(loc="upper right", fontsize=8, title="recommended", title_fontsize=8)
    else:
        ax_hist.text(0.5, 0.5, "no file has a DV", ha="center", va="center", transform=ax_hist.transAxes)
    threshold = float(s.get("max_deleted_ratio", 0.05))
    ax_hist.axvline(threshold, color="#555", linestyle=":", linewidth=1)
    ax_hist.text(threshold, 0.97, f" rewrite above {threshold:.0%}", transform=ax_hist.get_xaxis_transform(), fontsize=8,
                 va="top", color="#555")
    ax_hist.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax_hist.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_hist.set_xlim(0, 1)
    ax_hist.set_xlabel("rows deleted in the file")
    ax_hist.set_ylabel("files")
    no_dv = int((~report.files["has_dv"]).sum())
    ax_hist.set_title(f"Deleted ratio per file ({len(with_dv):,} with a DV; {no_dv:,} without, not shown)", fontsize=10)

    # 2. deleted rows per partition, coloured by the recommended action, labelled with the estimated read cost
    listed = (report.partitions["deleted_rows"] > 0) | (report.partitions["action"] != "")
    parts = report.partitions[listed].head(MAX_PARTITION_BARS)
    if len(parts):
        labels = [p if len(p) <= 28 else p[:25] + "…" for p in parts["partition"]][::-1]
        deleted = parts["deleted_rows"].to_numpy()[::-1]
        share = parts["deleted_ratio"].to_numpy()[::-1]
        cost = parts["est_full_scan_overhead"].to_numpy()[::-1]
        actions = parts["action"].to_numpy()[::-1]
        y = np.arange(len(parts))
        ax_part.barh(y, deleted, height=0.6, color=[ACTIONS.get(a, ACTIONS[""])[0] for a in actions])
        ax_part.set_yticks(y, labels, fontsize=8 if len(parts) > 12 else 9)
        ax_part.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
        ax_part.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
        for yi, d, sh, c, a in zip(y, deleted, share, cost, actions, strict=True):
            text = f" {percent(sh, 0)} deleted, read +{c:.0%}" + (f" → {ACTIONS[a][1]}" if a else "")
            ax_part.text(d, yi, text, va="center", fontsize=7, color="#333")
        ax_part.set_xlim(0, max(int(deleted.max()), 1) * 1.9)
        ax_part.set_xlabel(f"rows deleted by DVs (colour: recommended action; label: share deleted, est. extra full-scan "
                           f"cost on the {path})", fontsize=9)
    else:
        ax_part.text(0.5, 0.5, "no deleted rows", ha="center", va="center", transform=ax_part.transAxes)
        ax_part.set_yticks([])
    more = int(listed.sum()) - len(parts)
    ax_part.set_title("Deleted rows and est. read cost per partition" + (f" (top {len(parts)}, {more:,} more)" if more > 0
                                                                        else ""), fontsize=10)

    # 3. live DVs and deleted rows over versions
    v = report.versions
    ax_ver.step(v["version"], v["live_dvs"], where="post", color="#00798c", label="live DVs", marker="o", markersize=3)
    ax_ver.set_xlabel("table version")
    ax_ver.set_ylabel("live DVs", color="#00798c")
    ax_ver.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_ver.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_ver.set_ylim(bottom=0, top=max(1, int(v["live_dvs"].max() if len(v) else 1)) * 1.1)
    ax_rows = ax_ver.twinx()
    ax_rows.step(v["version"], v["deleted_rows"], where="post", color="#edae49", linestyle="--", label="deleted rows")
    ax_rows.set_ylabel("rows deleted by DVs", color="#b07d1a")
    ax_rows.yaxis.set_major_formatter(FuncFormatter(lambda val, _pos: f"{val:,.0f}"))
    ax_rows.set_ylim(bottom=0, top=max(1, int(v["deleted_rows"].max() if len(v) else 1)) * 1.1)
    lines = ax_ver.get_lines() + ax_rows.get_lines()
    ax_ver.legend(lines, [str(ln.get_label()) for ln in lines], loc="upper left", fontsize=8)
    ax_ver.set_title(f"DVs over versions {int(v['version'].min())}-{int(v['version'].max())}" if len(v) else "DVs over versions",
                     fontsize=10)
    return fig


def write_png(report: HealthReport, path: str, dpi: int = 110) -> None:
    """Save the figure as a PNG at ``path``."""
    figure(report).savefig(path, dpi=dpi)


def _png_bytes(report: HealthReport) -> bytes:
    buf = io.BytesIO()
    figure(report).savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return f"{int(v):,}"
    return "" if v is None else str(v)


def write_html(report: HealthReport, path: str, max_partitions: int = 200) -> None:
    """A self-contained HTML page: summary, recommendations, partitions, DV files, the pictures."""
    s = report.summary
    img = base64.b64encode(_png_bytes(report)).decode("ascii")
    summary_rows = [
        {"metric": "files (with a DV)", "value": f"{s['files']:,} ({s['files_with_dv']:,})"},
        {"metric": "rows deleted / physical",
         "value": f"{s['deleted_rows']:,} / {s['physical_rows']:,} ({percent(s['deleted_ratio'])})"},
        {"metric": "DV storage", "value": ", ".join(f"{k}: {v:,}" for k, v in s["dv_storage"].items()) or "none"},
        {"metric": "DV files (unreferenced)", "value": f"{s['dv_files']:,} ({s['dv_files_unreferenced']:,})"},
        {"metric": "DV bytes live / stale", "value": f"{human_bytes(s['dv_live_bytes'])} / {human_bytes(s['dv_stale_bytes'])}"},
        {"metric": "est. read overhead, full scan", "value": f"+{s['est_full_scan_overhead']:.1%}"},
        {"metric": "est. read overhead, 2-column aggregate", "value": f"+{s['est_aggregate_overhead']:.1%}"},
        {"metric": "read path assumed", "value": f"{report.read_path.label} ({s['read_path_reason']})"},
    ]
    recs = [{"rank": i + 1, "action": r.action, "partition": r.partition, "rows reclaimed": r.rows_reclaimed,
             "bytes reclaimed": r.bytes_reclaimed, "command": r.command, "sql": r.sql, "why": r.reason}
            for i, r in enumerate(report.recommendations)]
    parts = records(report.partitions.head(max_partitions))
    dv_files = records(report.dv_files.sort_values("live_dvs", ascending=False).head(max_partitions))
    problems = "".join(f"<li>{html.escape(p.message)}</li>" for p in report.problems)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>DV health: {html.escape(report.table)} v{report.version}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse;margin:1em 0;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}} th{{background:#f2f2f2}} img{{max-width:100%}}
code{{background:#f6f6f6}} .problems{{color:#a00}}</style></head><body>
<h1>DV health of <code>{html.escape(report.table)}</code> at version {report.version}</h1>
{f'<h2 class="problems">Problems</h2><ul class="problems">{problems}</ul>' if problems else ''}
<h2>Summary</h2>{_table(summary_rows, ["metric", "value"])}
<p><small>Read overhead model: {html.escape(report.model_text)}.</small></p>
<h2>Recommendations (ranked by rows reclaimed)</h2>
{_table(recs, REC_COLUMNS) if recs else "<p>Nothing to do.</p>"}
<h2>Pictures</h2><img alt="DV health pictures" src="data:image/png;base64,{img}">
<h2>Partitions (most deleted rows first{f", first {max_partitions}" if len(report.partitions) > max_partitions else ""})</h2>
{_table(parts, list(report.partitions.columns))}
<h2>DV files</h2>{_table(dv_files, list(report.dv_files.columns))}
</body></html>
"""
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
