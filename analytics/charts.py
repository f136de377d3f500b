"""PNG charts of the report (matplotlib, from the small per-window tables as pandas).

Theory of operation: each function takes a pandas frame read back from the report's
Parquet tables (a few rows per node and window, never the raw records) and writes one
PNG: messages/s over time per node and variant, the latency distribution (CDF over
messages, from the log-bucketed histogram) per variant, the Ntail(G) histogram per
variant, and the timeline of views per node (``history.timeline``: one row per node,
a bar per view it was in, coloured by view and labelled with the view's number in the
report's views table; hatched grey while not in a primary view, light grey before its
first view; a black tick where a daemon (re)started). Matplotlib draws with its Agg
backend (files only, no display needed).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .errors import AnalyticsError


def _pyplot():  # type: ignore[no-untyped-def]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise AnalyticsError("the charts need matplotlib: pip install 'amcast[analytics]'") from exc
    return plt


def _save(fig, path: Path) -> Path:  # type: ignore[no-untyped-def]
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    _pyplot().close(fig)
    return path


def throughput(df: pd.DataFrame, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    t0 = df["window"].min() if len(df) else 0.0
    for (node, variant), g in df.groupby(["node", "variant"]):
        g = g.sort_values("window")
        ax.plot(g["window"] - t0, g["msgs_per_s"], marker=".", label=f"node {node} {variant}")
    ax.set_xlabel("time since the first window (s)")
    ax.set_ylabel("delivered messages/s")
    ax.set_title("throughput per node")
    ax.grid(True, alpha=0.3)
    if len(df):
        ax.legend(fontsize=8)
    return _save(fig, path)


def latency(hist: pd.DataFrame, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for variant, g in hist.groupby("variant"):
        g = g.sort_values("log10_ms")
        ax.plot(10 ** g["log10_ms"], g["messages"].cumsum() / g["messages"].sum(),
                label=str(variant), drawstyle="steps-post")
    ax.set_xscale("log")
    ax.set_xlabel("send-to-delivery latency (ms)")
    ax.set_ylabel("share of delivered messages")
    ax.set_title("latency distribution (CDF)")
    ax.grid(True, alpha=0.3)
    if len(hist):
        ax.legend(fontsize=8)
    return _save(fig, path)


def ntail(hist: pd.DataFrame, path: Path) -> Path:
    plt = _pyplot()
    variants = sorted(hist["variant"].unique()) or ["(none)"]
    fig, axes = plt.subplots(1, len(variants), figsize=(4.5 * len(variants), 3.5),
                             squeeze=False)
    for ax, variant in zip(axes[0], variants, strict=True):
        g = hist[hist["variant"] == variant]
        total = g["vertices"].sum()
        ax.bar(g["ntail"], g["vertices"] / total if total else g["vertices"])
        ax.set_xticks(sorted(int(x) for x in g["ntail"]))
        avg = (g["ntail"] * g["vertices"]).sum() / total if total else 0.0
        ax.set_title(f"{variant}: avg Ntail(G) = {avg:.2f}", fontsize=10)
        ax.set_xlabel("Ntail(G) at delivery")
        ax.set_ylabel("share of ordered vertices")
        ax.grid(True, alpha=0.3, axis="y")
    return _save(fig, path)


def timeline(segments: pd.DataFrame, view_ids: list[int], path: Path) -> Path:
    """Views per node over time; ``view_ids`` in order give the views' numbers (#1...)."""
    plt = _pyplot()
    nodes = sorted(segments["node"].unique()) if len(segments) else []
    fig, ax = plt.subplots(figsize=(10, 1.0 + 0.55 * max(1, len(nodes))))
    t0 = float(segments["start"].min()) if len(segments) else 0.0
    number = {v: k + 1 for k, v in enumerate(view_ids)}
    colours = plt.get_cmap("tab10").colors
    row = {n: k for k, n in enumerate(nodes)}
    for s in segments.itertuples():
        y, x, width = row[s.node], s.start - t0, max(s.end - s.start, 0.0)
        if s.kind == "primary":
            k = number.get(int(s.view), 0)
            ax.barh(y, width, left=x, height=0.6, color=colours[k % len(colours)],
                    edgecolor="white")
            ax.text(x + width / 2, y, f"#{k}", ha="center", va="center", fontsize=7,
                    clip_on=True)
        else:
            grey = "#999999" if s.kind == "not primary" else "#dddddd"
            ax.barh(y, width, left=x, height=0.6, color=grey, edgecolor="white",
                    hatch="//" if s.kind == "not primary" else None)
    firsts = segments.groupby("node")["incarnation"].min() if len(segments) else {}
    for (node, inc), g in (segments.groupby(["node", "incarnation"]) if len(segments) else []):
        if inc != firsts[node]:
            ax.plot([g["start"].min() - t0] * 2, [row[node] - 0.4, row[node] + 0.4],
                    color="black", linewidth=2)
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(facecolor="#999999", hatch="//", label="not in a primary view"),
                       Patch(facecolor="#dddddd", label="before its first view")],
              fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_yticks(range(len(nodes)), [f"node {n}" for n in nodes])
    ax.invert_yaxis()
    ax.set_xlabel("time since the first record (s)")
    ax.set_title("views per node (#k: the k-th view; hatched: not in a primary view; "
                 "black tick: restart)", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)
