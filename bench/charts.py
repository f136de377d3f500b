"""The benchmarks' charts (matplotlib): W1 figures against N beside the peer systems
(``amcast bench plot-peers``) and light load against N (``amcast bench floor --plot``).

matplotlib comes with the ``analytics`` extra (``amcast.plots.pyplot`` says so in one
line without it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from amcast.plots import pyplot


def against_n(series: Sequence[Mapping[str, Any]], path: Path, *, title: str = "") -> Path:
    """Three panels against N, one line per series (a system with one variant):
    ordered msgs/s at saturation (log), sender latency p50 (marker) with p99 (bar top),
    CPU µs per ordered message at saturation (log).

    A series is ``{"system", "variant", "label", "points"}``, each point ``{"n", "mode"
    ("tput" or "lat"), "ordered_msgs_s", "lat_p50_ms", "lat_p99_ms", "cpu_us_per_msg"}``
    (None where not measured); a system keeps one colour, its variants differ in line
    style and marker."""
    plt = pyplot()
    systems = list(dict.fromkeys(s["system"] for s in series))
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "D", "v", "P"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), squeeze=False)
    tput_ax, lat_ax, cpu_ax = axes[0]
    seen: dict[str, int] = {}
    ns: set[int] = set()
    legend = []
    for index, s in enumerate(series):
        variant = seen[s["system"]] = seen.get(s["system"], -1) + 1
        look = {"color": f"C{systems.index(s['system']) % 10}",
                "linestyle": styles[variant % len(styles)],
                "marker": markers[variant % len(markers)], "linewidth": 1.6, "markersize": 5}
        legend.append(plt.Line2D([], [], label=s["label"], **look))

        def points(mode: str, key: str, s: Mapping[str, Any] = s) -> list[Mapping[str, Any]]:
            return [p for p in s["points"] if p["mode"] == mode and p.get(key) is not None]

        tput = points("tput", "ordered_msgs_s")
        if tput:
            tput_ax.plot([p["n"] for p in tput], [p["ordered_msgs_s"] for p in tput], **look)
        cpu = points("tput", "cpu_us_per_msg")
        if cpu:
            cpu_ax.plot([p["n"] for p in cpu], [p["cpu_us_per_msg"] for p in cpu], **look)
        _latency_bars(lat_ax, points("lat", "lat_p50_ms"),
                      0.12 * (index - (len(series) - 1) / 2), look)
        ns.update(p["n"] for p in s["points"])
    _against_n_axes((
        (tput_ax, "ordered msgs/s (closed loop, all sending)", "ordered msgs/s"),
        (lat_ax, "sender latency at a fixed rate: p50 (marker), p99 (bar top)", "latency (ms)"),
        (cpu_ax, "CPU per ordered message (closed loop)", "CPU µs / ordered msg"),
    ), ns)
    return _save(plt, fig, path, legend, title, columns=4)


def light_load(series: Sequence[Mapping[str, Any]], path: Path, *, title: str = "") -> Path:
    """Two panels against N at one fixed rate: sender latency p50 (marker) with p99 (bar
    top), and CPU µs of all processes per ordered message; one line per series
    ``{"label", "points": [{"n", "lat_p50_ms", "lat_p99_ms", "cpu_us_per_msg"}]}``."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), squeeze=False)
    lat_ax, cpu_ax = axes[0]
    markers = ["o", "s", "^", "D", "v", "P", "X"]
    ns: set[int] = set()
    legend = []
    for index, s in enumerate(series):
        look = {"color": f"C{index % 10}", "marker": markers[index % len(markers)],
                "linewidth": 1.6, "markersize": 5}
        legend.append(plt.Line2D([], [], label=s["label"], **look))
        _latency_bars(lat_ax, [p for p in s["points"] if p.get("lat_p50_ms") is not None],
                      0.1 * (index - (len(series) - 1) / 2), look)
        cpu = [p for p in s["points"] if p.get("cpu_us_per_msg") is not None]
        if cpu:
            cpu_ax.plot([p["n"] for p in cpu], [p["cpu_us_per_msg"] for p in cpu], **look)
        ns.update(p["n"] for p in s["points"])
    _against_n_axes((
        (lat_ax, "sender latency: p50 (marker), p99 (bar top)", "latency (ms)"),
        (cpu_ax, "CPU of all processes per ordered message", "CPU µs / ordered msg"),
    ), ns)
    return _save(plt, fig, path, legend, title, columns=3)


def _latency_bars(ax: Any, points: Sequence[Mapping[str, Any]], dodge: float,
                  look: Mapping[str, Any]) -> None:
    """p50 as the marker, p99 as the top of its bar; ``dodge`` sets the series of one N
    side by side."""
    if not points:
        return
    p50 = [p["lat_p50_ms"] for p in points]
    p99 = [p.get("lat_p99_ms") or p["lat_p50_ms"] for p in points]
    ax.errorbar([p["n"] + dodge for p in points], p50,
                yerr=[[0.0] * len(points), [hi - lo for lo, hi in zip(p50, p99, strict=True)]],
                capsize=3, **look)


def _against_n_axes(panels: Sequence[tuple[Any, str, str]], ns: set[int]) -> None:
    """Title, labels, the N ticks, a grid and a log scale with plain labels (or a note
    where a panel has no data)."""
    for ax, panel_title, ylabel in panels:
        ax.set_title(panel_title, fontsize=10)
        ax.set_xlabel("members N")
        ax.set_ylabel(ylabel)
        ax.set_xticks(sorted(ns))
        ax.grid(True, alpha=0.3, which="both")
        if ax.has_data():
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(_plain_log_labels())
            ax.yaxis.set_minor_formatter(_plain_log_labels())
        else:
            ax.text(0.5, 0.5, "no runs of this kind", ha="center", va="center",
                    transform=ax.transAxes, color="grey")


def _save(plt: Any, fig: Any, path: Path, legend: list[Any], title: str, *,
          columns: int) -> Path:
    """The legend under the panels (``columns`` entries a row), the title, the file."""
    fig.legend(handles=legend, loc="lower center", ncol=min(columns, max(1, len(legend))),
               fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    rows = -(-max(1, len(legend)) // columns)
    fig.tight_layout(rect=(0, 0.04 + 0.04 * rows, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plain_log_labels() -> Any:
    """Log-axis tick labels as plain numbers (``20,000``, ``0.3``) where matplotlib's
    own log formatter would put a label (``2 x 10^4``)."""
    from matplotlib.ticker import LogFormatterSciNotation

    class Plain(LogFormatterSciNotation):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return f"{x:,.6g}" if super().__call__(x, pos) else ""

    return Plain()
