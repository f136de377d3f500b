"""PNG charts of the report (matplotlib, from the small per-window tables as pandas).

Theory of operation: each function takes a pandas frame read back from the report's
Parquet tables (a few rows per node and window, never the raw records) and writes one
PNG: messages/s over time per node and variant, the latency distribution (CDF over
messages, from the log-bucketed histogram) per variant, and the Ntail(G) histogram per
variant. ``amcast.plots`` supplies pyplot with the Agg backend.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from amcast.plots import _pyplot


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
