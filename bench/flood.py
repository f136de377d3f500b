"""``amcast bench flood``: what a flood of attack datagrams makes a real cluster do.

Theory of operation:

1. Start N daemons (``LocalCluster``, loopback multicast, a fresh key ring, the
   default 1472-byte datagram budget) and one closed-loop load generator per node
   (``python -m amcast.loadgen``: every node sends ``--size``-byte agreed messages as
   fast as flow control allows and consumes every delivery), as ``bench cluster`` does.
2. *Baseline*: after ``--warmup`` seconds, sample every daemon (``status``: messages
   delivered, the engine's bytes and datagrams sent and received, drops by reason; and
   its RSS from ``/proc``), wait ``--window`` seconds, sample again.
3. For each attack of ``--attacks``, with the honest load still running: sample, run
   the attacker (``tools/floodattack.py``, its own process) until it has sent
   ``--datagrams`` datagrams to the group's address and port, wait ``--settle``
   seconds (repairs scheduled late), sample again.
   With ``--control``, the same attacker runs once more right after, sending to a port
   no daemon listens on: the honest throughput then shows what the attacker's own CPU
   costs the honest load on this host (on a small machine, much of the drop).
4. *After*: one more baseline window (the cluster recovered, or not).

Figures of an attack window (``attack_figures()``, pure):

- *honest msgs/s*: messages ordered (the slowest daemon's delivered delta) per second,
  and its percentage of the baseline's (target >= 80%).
- *excess bytes sent*: the daemons' bytes sent (all of them) beyond what the honest
  traffic of the window explains. Two estimates, and the larger counts: the baseline's
  bytes per ordered message times the messages ordered in the window, and the
  baseline's bytes per second times the window's seconds. *Amplification* is excess
  bytes over attack bytes (target <= 1; 0 when the excess is not positive).
- repair datagrams and bytes the daemons sent in the window, against the bound of the
  rate limits (``repair_bound()``: every daemon serving every other member's id with a
  full burst plus the rate for the window's seconds); nack datagrams sent; drops by
  reason (summed over daemons); largest daemon RSS before and after.
- the senders' flow control: halvings of the byte window (``window_losses``, summed
  over daemons; an insider's nacks are loss signals) and the smallest daemon's byte
  window at the end of the window. Throughput on a host with fewer cores than processes
  is bounded by the CPU long before the window, so these show what the nacks did to
  the window when the throughput cannot.

Everything stays on 127.0.0.1 and a 239.255.x.y group (TTL 0), bounded in time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from amcast.protocols.errors import AmcastError
from amcast.protocols.node_config import NodeConfig
from amcast.protocols.reliable.ratelimit import RepairLimits

from amcast.argtypes import non_negative, positive, whole
from amcast.client import BlockingClient
from amcast.loadgen import MIN_SIZE
from amcast.localcluster import LocalCluster, free_port
from tools.floodattack import KINDS

from . import children
from .cluster import cpu_seconds

NAME = "flood"
DAEMON_RCVBUF = 4 << 20
"""``network.recv_buffer_bytes``'s default: the engine's ``receive_buffer_bytes``."""
HELP = "attack floods (garbage, forged, replayed, insider nacks): amplification, throughput"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=whole(1), default=3, help="daemons (default 3)")
    p.add_argument(
        "--datagrams",
        type=whole(1),
        default=100_000,
        help="attack datagrams per attack (default 100,000)",
    )
    p.add_argument(
        "--attacks",
        default=",".join(KINDS),
        help=f"comma-separated, in order (default {','.join(KINDS)})",
    )
    p.add_argument(
        "--attack-rate",
        type=non_negative,
        default=0.0,
        help="attack datagrams per second at most (default 0: as fast as possible)",
    )
    p.add_argument(
        "--attacker-nice",
        type=whole(-20, 19),
        default=0,
        help="run the attacker at this nice level (e.g. 19): on a host with fewer cores "
        "than processes, what the daemons' handling of the flood costs, apart from the "
        "attacker's own CPU (default 0)",
    )
    p.add_argument("--window", type=positive, default=5.0, help="baseline seconds (default 5)")
    p.add_argument("--warmup", type=non_negative, default=2.0, help="seconds before the baseline")
    p.add_argument(
        "--settle",
        type=non_negative,
        default=0.5,
        help="seconds after an attack still counted in its window (default 0.5)",
    )
    p.add_argument(
        "--capture-s",
        type=positive,
        default=1.0,
        help="seconds the replay attacker records genuine traffic (and the most the insider "
        "waits to hear some; default 1)",
    )
    p.add_argument(
        "--control",
        action="store_true",
        help="after each attack, run the same attacker against a port no daemon listens "
        "on: what its CPU alone costs the honest load on this host",
    )
    p.add_argument("--size", type=whole(MIN_SIZE), default=100,
                   help="honest payload bytes (default 100)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--protocol",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="[protocol] setting for every daemon (repeatable)",
    )
    p.add_argument("--dir", type=Path, help="keep configs and logs here (default: a temp dir)")


# ---- pure computations (tested with hand-made samples) --------------------------------


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def _delta(
    first: Sequence[Mapping[str, Any]], last: Sequence[Mapping[str, Any]], key: str
) -> list[float]:
    return [float(b[key]) - float(a[key]) for a, b in zip(first, last, strict=True)]


def window_totals(
    first: Sequence[Mapping[str, Any]], last: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Totals between two ``sample()`` lists (one dict per daemon)."""
    seconds = max(_delta(first, last, "now"))
    ordered = min(_delta(first, last, "delivered"))
    drops: dict[str, int] = {}
    for a, b in zip(first, last, strict=True):
        for reason in set(a["drops"]) | set(b["drops"]):
            n = int(b["drops"].get(reason, 0)) - int(a["drops"].get(reason, 0))
            if n:
                drops[reason] = drops.get(reason, 0) + n
    return {
        "seconds": seconds,
        "ordered": ordered,
        "msgs_per_s": _ratio(ordered, seconds),
        "bytes_sent": sum(_delta(first, last, "bytes_sent")),
        "bytes_received": sum(_delta(first, last, "bytes_received")),
        "repairs_sent": sum(_delta(first, last, "repairs_sent")),
        "repair_bytes": sum(_delta(first, last, "repair_bytes")),
        "nacks_sent": sum(_delta(first, last, "nacks_sent")),
        "cpu_s": sum(_delta(first, last, "cpu")),
        "drops": drops,
        "rss_before": max(int(a["rss"]) for a in first),
        "rss_after": max(int(b["rss"]) for b in last),
        "window_losses": sum(
            float(b.get("window_losses", 0)) - float(a.get("window_losses", 0))
            for a, b in zip(first, last, strict=True)
        ),
        "window_bytes_min": min(int(b.get("window_bytes", 0)) for b in last),
    }


def repair_bound(limits: RepairLimits, daemons: int, seconds: float) -> float:
    """The most retransmission bytes the nacks of every claimable peer can cause in all
    ``daemons`` in ``seconds``: each daemon serves ``daemons - 1`` peers, each with a full
    burst and its rate (``reliable.ratelimit``)."""
    per_peer = limits.repair_burst_bytes + limits.repair_rate_bytes * seconds
    return daemons * (daemons - 1) * per_peer


def attack_figures(
    base: Mapping[str, Any], w: Mapping[str, Any], attack: Mapping[str, Any]
) -> dict[str, Any]:
    """The figures of one attack window ``w`` against the baseline window ``base``
    (both from ``window_totals``); ``attack``: the attacker's report."""
    per_msg = _ratio(base["bytes_sent"], base["ordered"])
    per_s = _ratio(base["bytes_sent"], base["seconds"])
    by_msg = w["bytes_sent"] - per_msg * w["ordered"]
    by_time = w["bytes_sent"] - per_s * w["seconds"]
    excess = max(by_msg, by_time)
    return {
        "excess_bytes_by_msg": by_msg,
        "excess_bytes_by_time": by_time,
        "excess_bytes": excess,
        "amplification": max(0.0, excess) / attack["bytes"] if attack["bytes"] else 0.0,
        "throughput_pct": 100.0 * _ratio(w["msgs_per_s"], base["msgs_per_s"]),
    }


def attack_row(
    kind: str,
    attack: Mapping[str, Any],
    w: Mapping[str, Any],
    f: Mapping[str, Any],
    bound: float,
    control_pct: float | None = None,
) -> list[Any]:
    return [
        kind,
        attack["datagrams"],
        attack["bytes"],
        attack["seconds"],
        w["seconds"],
        w["bytes_sent"],
        f["excess_bytes"],
        f["amplification"],
        w["msgs_per_s"],
        f["throughput_pct"],
        control_pct,
        w["cpu_s"],
        w["repairs_sent"],
        w["repair_bytes"],
        bound,
        w["nacks_sent"],
        w["rss_before"] / 2**20,
        w["rss_after"] / 2**20,
        w["window_losses"],
        w["window_bytes_min"] / 2**10,
    ]


ATTACK_COLUMNS = [
    "attack",
    "datagrams",
    "bytes",
    "attack s",
    "window s",
    "daemon bytes sent",
    "excess bytes",
    "sent/attack byte",
    "honest msgs/s",
    "% of baseline",
    "% control",
    "daemon CPU s",
    "repairs sent",
    "repair bytes",
    "repair bound bytes",
    "nacks sent",
    "RSS MiB before (max)",
    "RSS MiB after (max)",
    "window halvings",
    "byte window KiB after (min)",
]


# ---- sampling and running ------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


PROBE_TRIES = 3
PROBE_FAILURES: list[str] = []
"""Status probes a daemon refused (e.g. ``hello_timeout``: its event loop was busy for
``api.hello_timeout_s`` under a flood): reported in the notes, then tried again."""


def _status(socket: str) -> dict[str, Any]:
    for attempt in range(1, PROBE_TRIES + 1):
        try:
            with BlockingClient(socket, name="bench-probe") as c:
                return dict(c.status())
        except AmcastError as exc:
            PROBE_FAILURES.append(f"status probe of {socket} failed ({attempt}): {exc}")
            if attempt == PROBE_TRIES:
                raise
    raise AssertionError("unreachable")


def sample(cluster: LocalCluster) -> list[dict[str, Any]]:
    out = []
    for n in cluster.nodes:
        st = _status(n.socket)
        assert n.pid is not None
        engine, sent = st["engine"], st.get("datagrams", {}).get("sent", {})
        out.append(
            {
                "now": st["now"],
                "delivered": st["counters"]["messages_delivered"],
                "bytes_sent": engine.get("bytes_sent", 0),
                "bytes_received": engine.get("bytes_received", 0),
                "repairs_sent": sent.get("repair", 0),
                "nacks_sent": sent.get("nack", 0),
                "repair_bytes": engine.get("repair_bytes_sent", 0),
                "drops": st["counters"]["drops"],
                "cpu": cpu_seconds(n.pid),
                "rss": rss_bytes(n.pid),
                "view": st["view"],
                "window_bytes": engine.get("window_bytes", 0),
                "window_losses": engine.get("window_losses", 0),
            }
        )
    return out


def _limits(cluster: LocalCluster) -> RepairLimits:
    """The daemons' resolved repair limits: their ``[protocol]`` table with the daemon's
    default socket buffer (``network.recv_buffer_bytes``, which the bench leaves alone)."""
    names = {f.name for f in dataclasses.fields(NodeConfig) if f.init}
    table = {k: v for k, v in cluster.protocol.items() if k in names and k != "group_key"}
    cfg = NodeConfig(**{**table, "insecure": True, "receive_buffer_bytes": DAEMON_RCVBUF})
    return cfg.repair_limits(cluster.n)


def _view_id(view: Any) -> int:
    return int(view["id"]) if isinstance(view, Mapping) else int(view)


def _progress(line: str) -> None:
    print(f"[bench flood] {line}", file=sys.stderr, flush=True)


def attacker_command(kind: str, cluster: LocalCluster, key_file: Path, view: int,
                     count: int, *extra: str) -> list[str]:
    """The ``tools/floodattack.py`` command line aimed at ``cluster``'s group (every member
    named), ``count`` datagrams of ``kind``; ``extra`` options appended."""
    return children.tool(
        "floodattack", "--kind", kind,
        "--group", cluster.group, "--port", str(cluster.port), "--count", str(count),
        "--members", ",".join(map(str, range(cluster.n))), "--view", str(view),
        "--key-file", str(key_file), *extra,
    )


def _attack(
    kind: str,
    cluster: LocalCluster,
    key_file: Path,
    view: int,
    args: argparse.Namespace,
    target_port: int = 0,
) -> dict[str, Any]:
    cmd = attacker_command(kind, cluster, key_file, view, args.datagrams,
                           "--capture-s", str(args.capture_s), "--seed", str(args.seed))
    if args.attack_rate:
        cmd += ["--rate", str(args.attack_rate)]
    if target_port:
        cmd += ["--target-port", str(target_port)]
    if args.attacker_nice:
        cmd = ["nice", "-n", str(args.attacker_nice), *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"attacker {kind} exited {done.returncode}: {done.stderr[-400:]}")
    return dict(json.loads(done.stdout))


def _loadgens(cluster: LocalCluster, size: int) -> list[subprocess.Popen[str]]:
    extra = ["--duration", "3600", "--size", str(size), "--linger", "0", "--receive"]
    return [
        subprocess.Popen(
            [sys.executable, "-m", "amcast.loadgen", "--socket", s, "--tag", str(i), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, s in enumerate(cluster.sockets)
    ]


def _stop(procs: list[subprocess.Popen[str]]) -> list[str]:
    """Stop the load generators; one line per one that had died before (a client the
    daemon cut off is reported, not hidden)."""
    failures = []
    for k, p in enumerate(procs):
        if p.poll() is not None:
            err = (p.stderr.read() if p.stderr else "").strip().splitlines()
            failures.append(
                f"load generator {k} exited {p.returncode} during the run: "
                f"{err[-1] if err else 'no output'}"
            )
            continue
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
    return failures


def measure(
    cluster: LocalCluster, args: argparse.Namespace, key_file: Path, attacks: list[str]
) -> dict[str, Any]:
    procs = _loadgens(cluster, args.size)
    try:
        _progress(f"{cluster.n} closed-loop senders, warm-up {args.warmup:.0f} s ...")
        time.sleep(args.warmup)
        _progress(f"baseline window, {args.window:.0f} s ...")
        first = sample(cluster)
        time.sleep(args.window)
        last = sample(cluster)
        base = window_totals(first, last)
        _progress(
            f"baseline: {base['msgs_per_s']:,.0f} msgs/s ordered, "
            f"{base['bytes_sent'] / base['seconds'] / 1e6:.1f} MB/s sent by the daemons"
        )
        results = []
        for kind in attacks:
            view = _view_id(last[0]["view"])
            _progress(f"attack {kind}: {args.datagrams:,} datagrams ...")
            first = sample(cluster)
            report = _attack(kind, cluster, key_file, view, args)
            time.sleep(args.settle)
            last = sample(cluster)
            w = window_totals(first, last)
            f = attack_figures(base, w, report)
            _progress(
                f"attack {kind}: {report['datagrams']:,} datagrams in "
                f"{report['seconds']:.1f} s; honest {w['msgs_per_s']:,.0f} msgs/s "
                f"({f['throughput_pct']:.0f}%), {f['amplification']:.3f} bytes sent "
                "per attack byte"
            )
            entry = {"kind": kind, "attack": report, "window": w, "figures": f}
            if args.control:
                _progress(f"control {kind}: the same attacker, to a port no daemon listens on")
                first = sample(cluster)
                _attack(kind, cluster, key_file, view, args, target_port=free_port())
                time.sleep(args.settle)
                last = sample(cluster)
                cw = window_totals(first, last)
                entry["control"] = {"window": cw, "figures": attack_figures(base, cw, report)}
                _progress(f"control {kind}: honest {cw['msgs_per_s']:,.0f} msgs/s")
            results.append(entry)
        _progress(f"after the attacks, {args.window:.0f} s ...")
        first = sample(cluster)
        time.sleep(args.window)
        after = window_totals(first, sample(cluster))
    finally:
        failures = _stop(procs)
    return {"baseline": base, "attacks": results, "after": after, "failures": failures}


def run(args: argparse.Namespace) -> dict[str, Any]:
    attacks = [a for a in str(args.attacks).split(",") if a]
    unknown = set(attacks) - set(KINDS)
    if unknown:
        raise SystemExit(f"unknown attacks: {', '.join(sorted(unknown))} (know {KINDS})")
    from amcast.commands.cluster import parse_protocol

    tmp = None
    if args.dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="amcast-flood-")
        base_dir = Path(tmp.name)
    else:
        base_dir = args.dir
    try:
        cluster = LocalCluster(
            args.nodes, base_dir / "cluster", protocol=parse_protocol(args.protocol)
        )
        _progress(f"starting {args.nodes} daemons ...")
        cluster.start()
        key_file = cluster.key_file
        assert key_file is not None  # the bench never runs insecure
        try:
            limits = _limits(cluster)
            m = measure(cluster, args, key_file, attacks)
        finally:
            cluster.stop()
    finally:
        if tmp is not None:
            tmp.cleanup()
    base, after = m["baseline"], m["after"]
    rows, drop_rows, figures = [], [], {}
    figures["baseline honest msgs/s"] = base["msgs_per_s"]
    figures["after the attacks, honest msgs/s"] = after["msgs_per_s"]
    reasons = sorted({r for a in m["attacks"] for r in a["window"]["drops"]})
    for a in m["attacks"]:
        kind, w, f = a["kind"], a["window"], a["figures"]
        control = a.get("control")
        control_pct = control["figures"]["throughput_pct"] if control else None
        bound = repair_bound(limits, args.nodes, w["seconds"])
        rows.append(attack_row(kind, a["attack"], w, f, bound, control_pct))
        if control_pct is not None:
            figures[f"{kind}: control (no daemon listening) % of baseline"] = control_pct
        drop_rows.append([kind, *(w["drops"].get(r, 0) for r in reasons)])
        figures[f"{kind}: bytes sent per attack byte"] = f["amplification"]
        figures[f"{kind}: honest throughput % of baseline"] = f["throughput_pct"]
    notes = [
        f"{os.cpu_count()} CPUs shared by {args.nodes} daemons, {args.nodes} load generators "
        "and the attacker",
        "excess bytes: daemon bytes sent beyond the larger of baseline bytes/msg x msgs "
        "ordered and baseline bytes/s x seconds; sent/attack byte = excess / attack bytes",
        "% control: honest throughput while the same attacker sends to a port no daemon "
        "listens on (--control): the share of the drop that is the attacker's own CPU",
        "replay: byte-for-byte copies of genuine datagrams; the wire's replay guard drops "
        "them (replay_*, freshness window and per-session anti-replay bitmap)",
        *m["failures"],
        *PROBE_FAILURES,
    ]
    for a in m["attacks"]:
        if "captured_kinds" in a["attack"]:
            notes.append(
                f"replay captured {a['attack']['captured']:,} datagrams: "
                + ", ".join(f"{k} {v:,}" for k, v in sorted(a["attack"]["captured_kinds"].items()))
            )
    return {
        "title": f"amcast bench flood: {args.nodes} daemons, closed-loop {args.size}-byte "
        f"agreed messages, {args.datagrams:,} attack datagrams per attack",
        "tables": [
            {
                "title": f"baseline {base['msgs_per_s']:,.0f} msgs/s, "
                f"{base['bytes_sent'] / base['seconds'] / 1e6:.2f} MB/s sent by the "
                f"daemons, daemon CPU {base['cpu_s'] / base['seconds']:.2f} s/s, "
                f"RSS max {base['rss_after'] / 2**20:.1f} MiB",
                "columns": ATTACK_COLUMNS,
                "rows": rows,
            },
            {
                "title": "drops during each attack window (all daemons), by reason",
                "columns": ["attack", *reasons],
                "rows": drop_rows,
            },
        ],
        "figures": figures,
        "notes": notes,
        "runs": m,
    }
