"""Charts for people: latency distributions of simulated or measured runs (matplotlib;
``amcast simulate --plot``). The benchmarks' charts (W1 against N beside the peer
systems, light load against N) are the checkout's, ``bench/charts.py``.

matplotlib comes with the ``analytics`` extra; without it, plotting raises a clear
``ConfigurationError`` and nothing else is affected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .protocols.errors import ConfigurationError


def pyplot():  # type: ignore[no-untyped-def]
    """``matplotlib.pyplot`` drawing to files (Agg), or a one-line error without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigurationError(
            "plotting needs matplotlib: pip install 'amcast[analytics]'"
        ) from exc
    return plt


def latency_cdfs(
    panels: Mapping[str, Mapping[str, Sequence[float]]], path: Path, *, unit_ms: bool = True
) -> Path:
    """One panel per title; in each, the latency CDF (sorted seconds) of every series."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels.items(), strict=True):
        for label, values in series.items():
            if not values:
                continue
            xs = [v * 1000 if unit_ms else v for v in values]
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.plot(xs, ys, label=label, linewidth=1.6)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("send-to-delivery latency (ms)" if unit_ms else "latency (s)")
        ax.set_ylabel("share of deliveries")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
