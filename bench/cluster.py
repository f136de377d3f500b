"""``amcast bench cluster``: workload W1 on real daemons over loopback multicast.

Theory of operation, for each N in ``--nodes`` (default 4 and 8):

1. *Idle run* (``--idle`` seconds, default 5; 0 skips): start N daemons
   (``LocalCluster``) and, before any client connects, sample every daemon's CPU time
   (``/proc/PID/stat``) and its ``status`` at the start and end of the idle window; a
   daemon's share of a core is its CPU seconds / the window's seconds (its clock); the
   table shows the largest (heartbeats and timers only).
2. *Throughput run*, on the same daemons: one load-generator process per node
   (``python -m amcast.loadgen``) sending ``--size``-byte ``agreed`` messages as fast as
   flow control allows for warm-up + ``--duration`` seconds (with ``--receive``, the
   default, each client also joins the group and consumes every delivery). After the
   warm-up and at the end, the bench *samples* every daemon: its ``status`` (messages
   delivered, its clock, the engine's counters, ``datagrams`` sent and received by kind)
   and its CPU time, plus the load generators' CPU time and the host's UDP
   ``RcvbufErrors`` (``/proc/net/snmp``: the daemons run in this process's network
   namespace). Each message is ordered once and delivered once per node, so a node's
   delivered-messages rate *is* the ordered distinct-messages rate it sees; the slowest
   node bounds the cluster, and its delivered delta is the window's *ordered messages*.
3. *Latency run*: a fresh cluster, one client on node 0 sending ``--latency-rate``
   messages/s (default 1,000) for ``--latency-warmup`` (1 s) + ``--latency-duration``
   seconds, and a receive-only client (``--receive-only``) on every other node, so that,
   as in W1, all N members joined and each receives every message. The sender measures
   send-to-delivery latency of its own messages (p50/p99, the whole run); the daemons
   are sampled as in 2 after the warm-up and at the end of sending (light load).

With ``--mode embedded`` there are no daemons: each node is one application process
embedding its member (``embedded_nodes``), running the same load generator, started
from the same configuration files; the members serve their API sockets, so runs 2 and 3
sample them as they sample daemons (their CPU includes the load they generate); run 1
is skipped (an idle member is an idle application).

Where the latency goes (``stage_latencies()``, after the latency run): every daemon's
delivery log records, per ordered vertex, ``send_ts`` (when the sender's daemon made
the vertex) and ``ts`` (when this daemon ordered it), both on the host's one clock. For
node 0's messages after the warm-up: *vertex to ordered at the sender* (multicast, the
others' ack vertices back, the ToTo votes) and *at the other daemons*; the client's
send-to-delivery latency minus the first is the daemon's two client hops (frame in,
submit, vertex; deliver frame out to the client).

Figures of a window (``window()``, pure, from two samples): ordered messages; daemon CPU
seconds (all daemons), per ordered message, and each daemon's share of a core; datagrams
sent and received by kind (summed over all daemons) per ordered message;
retransmissions (``engine.retransmissions`` delta) as a percentage of data datagrams
sent; receive-buffer drops (``RcvbufErrors`` delta, host-wide: anything else on the
host counts too).

Every load is bounded in time; traffic stays on 127.0.0.1 and a 239.255.x.y group.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from amcast.protocols.swap.engine import ORDERINGS

from amcast.argtypes import non_negative, positive, whole
from amcast.client import BlockingClient
from amcast.loadgen import MIN_SIZE
from amcast.localcluster import LocalCluster

from . import embedded_nodes
from .options import group_sizes
from .trace_stages import STAGES, message_stages

NAME = "cluster"
HELP = "W1: N daemons on loopback multicast, ordered msgs/s, CPU s/msg, latency p50/p99"
CLK_TCK = os.sysconf("SC_CLK_TCK")
KINDS = ("data", "ack_only", "heartbeat", "nack", "repair", "membership")
"""Datagram kinds, in table order (``protocols.wire.codec.KIND_NAMES``)."""
SNMP = "/proc/net/snmp"
MODES = ("daemon", "embedded")
"""Where each node's member runs (``--mode``): an ``amcastd`` with a client process, or
the application process itself (``embedded_nodes``)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", default="4,8", help="comma-separated cluster sizes (default 4,8)")
    p.add_argument("--duration", type=positive, default=10.0, help="measured seconds (default 10)")
    p.add_argument("--warmup", type=non_negative, default=3.0, help="seconds before measuring")
    p.add_argument("--size", type=whole(MIN_SIZE), default=100, help="payload bytes (default 100)")
    p.add_argument("--no-receive", dest="receive", action="store_false",
                   help="clients only send (do not join the group and consume deliveries)")
    p.add_argument("--latency-rate", type=positive, default=1000.0)
    p.add_argument("--latency-duration", type=positive, default=5.0,
                   help="measured seconds of the latency run (default 5)")
    p.add_argument("--latency-warmup", type=non_negative, default=1.0,
                   help="seconds of the latency run before measuring (default 1)")
    p.add_argument("--skip-latency", action="store_true")
    p.add_argument("--trace", action="store_true",
                   help="latency run with logs.trace on: time each stage of one message "
                        "(the tracing itself costs the daemons CPU)")
    p.add_argument("--idle", type=non_negative, default=5.0,
                   help="seconds of idle CPU measurement before the throughput load "
                        "(default 5; 0 skips)")
    p.add_argument("--ordering", choices=ORDERINGS, default=None,
                   help="protocol.ordering of every daemon (default: the daemons' default, "
                        "toto); the same as --protocol ordering=NAME")
    p.add_argument("--protocol", action="append", default=[], metavar="KEY=VALUE",
                   help="[protocol] setting for every daemon (repeatable)")
    p.add_argument("--dir", type=Path, help="keep configs and logs here (default: a temp dir)")
    p.add_argument("--transport", choices=("multicast", "unicast"), default="multicast",
                   help="network.transport of the daemons (default multicast)")
    p.add_argument("--core", choices=("native", "pure"), default=None,
                   help="AMCAST_CORE of every daemon (default: unset, auto)")
    p.add_argument("--seal", choices=("native", "pure"), default=None,
                   help="AMCAST_SEAL of every daemon: sealing, opening and the replay guard "
                        "on the native core (default: unset)")
    p.add_argument("--reliable", choices=("native", "pure"), default=None,
                   help="AMCAST_RELIABLE of every daemon: the reliable causal layer on the "
                        "native core (default: unset, it follows the core)")
    p.add_argument("--io", choices=("native", "pure"), default=None,
                   help="AMCAST_IO of every daemon: batched socket I/O (recvmmsg, sendmmsg) "
                        "on the native core (default: unset, it follows the core)")
    p.add_argument("--mode", choices=MODES, default="daemon",
                   help="daemon: amcastd processes with a client process each (default); "
                        "embedded: application processes that each embed their member "
                        "(amcast.member.Member), no daemons")


def core_vars(args: argparse.Namespace) -> dict[str, str]:
    """The variables ``--core``, ``--seal``, ``--reliable`` and ``--io`` set (none:
    unset)."""
    return {name: value for name, value in (("AMCAST_CORE", args.core),
                                            ("AMCAST_SEAL", args.seal),
                                            ("AMCAST_RELIABLE", args.reliable),
                                            ("AMCAST_IO", getattr(args, "io", None)))
            if value}


def core_env(args: argparse.Namespace, n: int) -> list[list[str]]:
    """Per-daemon ``env`` wrappers setting ``core_vars`` (none: no wrapper)."""
    env = [f"{name}={value}" for name, value in core_vars(args).items()]
    return [["env", *env] for _ in range(n)] if env else []


# ---- pure computations (tested with hand-made samples) --------------------------------


def rcvbuf_errors(snmp: str) -> int:
    """``Udp: ... RcvbufErrors`` from the text of ``/proc/net/snmp`` (a header line and a
    values line, both starting ``Udp:``)."""
    udp = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Udp:")]
    if len(udp) < 2 or "RcvbufErrors" not in udp[0]:
        raise ValueError("no Udp RcvbufErrors in /proc/net/snmp")
    return int(udp[1][udp[0].index("RcvbufErrors")])


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def kind_deltas(first: Sequence[Mapping[str, Any]], last: Sequence[Mapping[str, Any]],
                direction: str) -> dict[str, int]:
    """Datagrams ``direction`` ("sent" or "received") in the window, by kind, summed over
    all daemons (kinds a daemon does not report count 0)."""
    out = dict.fromkeys(KINDS, 0)
    for a, b in zip(first, last, strict=True):
        before, after = a["datagrams"][direction], b["datagrams"][direction]
        for kind in set(before) | set(after) | set(KINDS):
            out[kind] = out.get(kind, 0) + int(after.get(kind, 0)) - int(before.get(kind, 0))
    return out


def window(first: Sequence[Mapping[str, Any]], last: Sequence[Mapping[str, Any]], *,
           rcvbuf: tuple[int, int] | None = None,
           clients_cpu: tuple[float, float] | None = None) -> dict[str, Any]:
    """The figures of one measured window from two ``sample()`` lists (one dict per
    daemon: ``now``, ``delivered``, ``cpu``, ``engine``, ``datagrams``), the
    ``RcvbufErrors`` before and after, and the clients' CPU seconds before and after."""
    pairs = list(zip(first, last, strict=True))
    seconds = [b["now"] - a["now"] for a, b in pairs]
    delivered = [b["delivered"] - a["delivered"] for a, b in pairs]
    cpu = [b["cpu"] - a["cpu"] for a, b in pairs]
    ordered = min(delivered)
    sent, received = kind_deltas(first, last, "sent"), kind_deltas(first, last, "received")
    retrans = sum(int(b["engine"].get("retransmissions", 0))
                  - int(a["engine"].get("retransmissions", 0)) for a, b in pairs)
    daemon_cpu = sum(cpu)
    wakes = sum(int(b["wakeups"]) - int(a["wakeups"]) for a, b in pairs)
    return {
        "seconds": max(seconds),
        "ordered": ordered,
        "rates": [_ratio(d, s) for d, s in zip(delivered, seconds, strict=True)],
        "daemon_cpu_s": daemon_cpu,
        "cpu_per_msg_s": _ratio(daemon_cpu, ordered),
        "core_shares": [_ratio(c, s) for c, s in zip(cpu, seconds, strict=True)],
        "wakeups": wakes,
        "wakeups_per_msg": _ratio(wakes, ordered),
        "cpu_per_wakeup_s": _ratio(daemon_cpu, wakes),
        "clients_cpu_s": None if clients_cpu is None else clients_cpu[1] - clients_cpu[0],
        "datagrams_sent": sent,
        "datagrams_received": received,
        "sent_per_msg": {k: _ratio(v, ordered) for k, v in sent.items()},
        "received_per_msg": {k: _ratio(v, ordered) for k, v in received.items()},
        "retransmissions": retrans,
        "retransmitted_pct": 100.0 * _ratio(retrans, sent["data"]),
        "rcvbuf_errors": None if rcvbuf is None else rcvbuf[1] - rcvbuf[0],
        "cores": cores(last),
    }


def cores(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    """The distinct data-path cores the sampled nodes ran (``status``'s ``core``: which
    implementation decodes, seals, orders and runs the reliable layer), one line each,
    e.g. ``decode native, seal pure, order native, reliable native``."""
    seen: list[str] = []
    for s in samples:
        core = s.get("core")
        if isinstance(core, Mapping):
            line = ", ".join(f"{part} {impl}" for part, impl in core.items())
            if line not in seen:
                seen.append(line)
    return seen


def idle_share(first: Sequence[Mapping[str, Any]],
               last: Sequence[Mapping[str, Any]]) -> float:
    """The largest daemon's share of a core (CPU seconds / seconds) between two samples."""
    return max(_ratio(b["cpu"] - a["cpu"], b["now"] - a["now"])
               for a, b in zip(first, last, strict=True))


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def send_spread(sent: list[int]) -> float | None:
    """Fairness of the closed loop: the most any member sent over the least (1 = equal)."""
    if not sent or min(sent) <= 0:
        return None
    return max(sent) / min(sent)


def throughput_row(n: int, w: Mapping[str, Any], *, drops: int,
                   idle: float | None, sent: list[int] | None = None,
                   disconnected: int = 0) -> list[Any]:
    rates = w["rates"]
    return [n, min(rates), sum(rates) / len(rates), w["cpu_per_msg_s"] * 1e6,
            w["daemon_cpu_s"], w["clients_cpu_s"], w["retransmissions"],
            w["retransmitted_pct"], w["rcvbuf_errors"], drops,
            send_spread(sent or []), disconnected, _pct(idle)]


THROUGHPUT_COLUMNS = ["N", "slowest msgs/s", "mean msgs/s", "CPU us/msg", "daemon CPU s",
                      "client CPU s", "retransmissions", "retrans % of data",
                      "rcvbuf errors", "drops", "send max/min", "clients cut off",
                      "idle core % (max daemon)"]


def latency_row(n: int, report: Mapping[str, Any], w: Mapping[str, Any]) -> list[Any]:
    shares = w["core_shares"]
    return [n, report.get("latency_samples", 0),
            report.get("latency_p50_s", float("nan")) * 1e3,
            report.get("latency_p99_s", float("nan")) * 1e3,
            w["ordered"], w["daemon_cpu_s"], w["cpu_per_msg_s"] * 1e6,
            100.0 * max(shares), 100.0 * sum(shares) / len(shares),
            w["wakeups_per_msg"], w["cpu_per_wakeup_s"] * 1e6, w["clients_cpu_s"],
            w["retransmitted_pct"], w["rcvbuf_errors"]]


LATENCY_COLUMNS = ["N", "samples", "p50 ms", "p99 ms", "ordered msgs", "daemon CPU s",
                   "CPU us/msg", "core % (max daemon)", "core % (mean daemon)",
                   "daemon wake-ups/msg", "CPU us/wake-up", "client CPU s",
                   "retrans % of data", "rcvbuf errors"]


def datagram_row(n: int, load: str, w: Mapping[str, Any], direction: str) -> list[Any]:
    per = w[f"{direction}_per_msg"]
    return [n, load, *(per[k] for k in KINDS), sum(per[k] for k in KINDS)]


DATAGRAM_COLUMNS = ["N", "load", *KINDS, "total"]


# ---- sampling and running ------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wakeups(pid: int) -> int:
    """Times the process's main thread (a daemon's event loop) blocked and was woken up:
    ``voluntary_ctxt_switches`` of ``/proc/PID/status``."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise ValueError(f"no voluntary_ctxt_switches in /proc/{pid}/status")


def read_rcvbuf_errors() -> int:
    with open(SNMP) as fh:
        return rcvbuf_errors(fh.read())


def protocol_settings(pairs: list[str], ordering: str | None = None) -> dict[str, Any]:
    from amcast.commands.cluster import parse_protocol

    chosen = {"ordering": ordering} if ordering is not None else {}
    return {"datagram_budget": 65000, **chosen, **parse_protocol(pairs)}


def sample(cluster: LocalCluster) -> list[dict[str, Any]]:
    out = []
    for n in cluster.nodes:
        with BlockingClient(n.socket, name="bench-probe") as c:
            st = c.status()
        assert n.pid is not None
        out.append({"now": st["now"], "delivered": st["counters"]["messages_delivered"],
                    "cpu": cpu_seconds(n.pid), "wakeups": wakeups(n.pid),
                    "drops": st["counters"]["drops"],
                    "engine": st["engine"], "core": st.get("core"),
                    "datagrams": st.get("datagrams", {"sent": {}, "received": {}})})
    return out


def clients_cpu(procs: list[subprocess.Popen[str]]) -> dict[int, float]:
    """CPU seconds of each load generator by PID. Not polled: one that has exited stays a
    zombie, its CPU time still readable, until ``_finish`` reaps it."""
    cpu: dict[int, float] = {}
    for p in procs:
        with contextlib.suppress(OSError):  # already reaped: left out of both samples
            cpu[p.pid] = cpu_seconds(p.pid)
    return cpu


def clients_cpu_window(first: Mapping[int, float], last: Mapping[int, float]
                       ) -> tuple[float, float]:
    """The two samples summed over the clients present in both (a client reaped between
    them would otherwise count as negative CPU)."""
    both = first.keys() & last.keys()
    return sum(first[p] for p in both), sum(last[p] for p in both)


def _loadgen(socket: str, tag: int, extra: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "amcast.loadgen", "--socket", socket, "--tag", str(tag), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _finish(procs: list[subprocess.Popen[str]],
            timeout: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Reports of the load generators that finished, and one line per one that failed
    (e.g. a receiving client the daemon disconnected as a slow reader on an overloaded
    host: the daemons' rates stay valid, the failure is reported, not hidden)."""
    reports, failures = [], []
    for k, p in enumerate(procs):
        out, err = p.communicate(timeout=timeout)
        if p.returncode != 0:
            lines = [ln for ln in err.strip().splitlines() if ln.strip()]
            failures.append(f"load generator {k} exited {p.returncode}: "
                            f"{lines[-1] if lines else 'no output'}")
            continue
        reports.append(json.loads(out))  # its only line: nothing else writes to its stdout
    return reports, failures


def _measure(cluster: LocalCluster, procs: list[subprocess.Popen[str]],
             start: float, warmup: float, end: float) -> dict[str, Any]:
    """Sample at ``start + warmup`` and at ``end`` (monotonic); the window's figures."""
    time.sleep(max(0.0, start + warmup - time.monotonic()))
    rcv0, cli0, first = read_rcvbuf_errors(), clients_cpu(procs), sample(cluster)
    time.sleep(max(0.0, end - time.monotonic()))
    last, cli1, rcv1 = sample(cluster), clients_cpu(procs), read_rcvbuf_errors()
    w = window(first, last, rcvbuf=(rcv0, rcv1), clients_cpu=clients_cpu_window(cli0, cli1))
    w["drops"] = {}
    for s in last:
        for k, v in s["drops"].items():
            w["drops"][k] = w["drops"].get(k, 0) + v
    return w


def _run_embedded(cluster: LocalCluster, args: argparse.Namespace,
                  extra: list[list[str]], warmup: float, total: float
                  ) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """One window with embedded members (``embedded_nodes``): the members start and see
    each other, then the window, then they leave; the window and the reports."""
    procs = embedded_nodes.start(cluster, extra, core_vars(args))
    try:
        start = time.monotonic()
        w = _measure(cluster, [], start, warmup, start + total)
        w["clients_cpu_s"] = None  # no client processes: the members' CPU is all
        embedded_nodes.stop(procs)
        reports, failures = _finish(procs, timeout=total + 60)
    finally:
        embedded_nodes.kill(procs)
    return w, reports, failures


def throughput(n: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    cluster = LocalCluster(n, base / f"throughput-n{n}",
                           protocol=protocol_settings(args.protocol, args.ordering),
                           transport=args.transport, wrappers=core_env(args, n))
    total = args.warmup + args.duration
    extra = ["--duration", str(total), "--size", str(args.size), "--linger", "0"]
    if args.receive:
        extra.append("--receive")
    if args.mode == "embedded":
        print(f"[bench cluster] N={n}: {n} embedded members sending for {total:.0f} s "
              f"(warm-up {args.warmup:.0f} s) ...", file=sys.stderr, flush=True)
        w, reports, failures = _run_embedded(cluster, args, [extra] * n, args.warmup, total)
        return {"n": n, "window": w, "idle_core_share_max": None,
                "sent": sum(r["sent"] for r in reports),
                "sent_per_member": [r["sent"] for r in reports], "failures": failures}
    print(f"[bench cluster] N={n}: starting daemons ...", file=sys.stderr, flush=True)
    cluster.start()
    try:
        idle = None
        if args.idle > 0:
            print(f"[bench cluster] N={n}: idle for {args.idle:.0f} s ...",
                  file=sys.stderr, flush=True)
            first = sample(cluster)
            time.sleep(args.idle)
            idle = idle_share(first, sample(cluster))
        procs = [_loadgen(s, i, extra) for i, s in enumerate(cluster.sockets)]
        start = time.monotonic()
        print(f"[bench cluster] N={n}: {n} senders for {total:.0f} s "
              f"(warm-up {args.warmup:.0f} s) ...", file=sys.stderr, flush=True)
        w = _measure(cluster, procs, start, args.warmup, start + total)
        reports, failures = _finish(procs, timeout=60)
    finally:
        cluster.stop()
    return {"n": n, "window": w, "idle_core_share_max": idle,
            "sent": sum(r["sent"] for r in reports),
            "sent_per_member": [r["sent"] for r in reports], "failures": failures}


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank ``q`` quantile (0..1); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]


def stage_latencies(log_dirs: Sequence[Path], *, sender: int, skip_s: float
                    ) -> dict[str, list[float]]:
    """Seconds from vertex to ordered, for ``sender``'s message vertices, at the sender
    (``own``) and at every other daemon (``others``), leaving out the first ``skip_s``
    seconds of the sender's messages (warm-up). Reads each ``delivery.jsonl``."""
    records: list[tuple[bool, float, float]] = []
    for node, directory in enumerate(log_dirs):
        path = Path(directory) / "delivery.jsonl"
        if not path.exists():
            continue
        with path.open() as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a line cut short by the daemon's stop
                if rec.get("type") != "delivery" or rec.get("sender") != sender:
                    continue
                records.append((node == sender, float(rec["send_ts"]), float(rec["ts"])))
    if not records:
        return {"own": [], "others": []}
    start = min(sent for _, sent, _ in records) + skip_s
    return {
        "own": [ts - sent for own, sent, ts in records if own and sent >= start],
        "others": [ts - sent for own, sent, ts in records if not own and sent >= start],
    }


def stage_row(n: int, report: Mapping[str, Any], stages: Mapping[str, Sequence[float]]
              ) -> list[Any]:
    own, others = stages["own"], stages["others"]
    total50 = report.get("latency_p50_s", float("nan"))
    own50 = percentile(own, 0.5)
    return [n, total50 * 1e3, own50 * 1e3, percentile(own, 0.99) * 1e3,
            percentile(others, 0.5) * 1e3, percentile(others, 0.99) * 1e3,
            (total50 - own50) * 1e3]


STAGE_COLUMNS = ["N", "client p50 ms", "vertex->ordered at sender p50 ms", "p99 ms",
                 "vertex->ordered at others p50 ms", "p99 ms",
                 "client hops (p50 difference) ms"]


def latency(n: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    cluster = LocalCluster(n, base / f"latency-n{n}",
                           protocol=protocol_settings(args.protocol, args.ordering),
                           transport=args.transport, wrappers=core_env(args, n),
                           extra={"logs": {"trace": True}} if args.trace else {})
    total = args.latency_warmup + args.latency_duration
    print(f"[bench cluster] N={n}: latency run, {args.latency_rate:.0f} msgs/s from node 0 for "
          f"{total:.0f} s (warm-up {args.latency_warmup:.0f} s) ...", file=sys.stderr, flush=True)
    receiver = ["--receive-only", "--duration", str(total), "--linger", "0.5"]
    sender = ["--rate", str(args.latency_rate), "--duration", str(total),
              "--size", str(args.size), "--receive", "--linger", "0.5"]
    if args.mode == "embedded":
        w, reports, failures = _run_embedded(cluster, args, [sender] + [receiver] * (n - 1),
                                             args.latency_warmup, total)
    else:
        cluster.start()
        try:
            # receivers first (they join while the sender starts), then the sender
            procs = [_loadgen(s, i, receiver) for i, s in enumerate(cluster.sockets) if i > 0]
            procs.insert(0, _loadgen(cluster.sockets[0], 0, sender))
            start = time.monotonic()
            w = _measure(cluster, procs, start, args.latency_warmup, start + total)
            reports, failures = _finish(procs, timeout=total + 60)
        finally:
            cluster.stop()
    if failures and failures[0].startswith("load generator 0 "):
        raise RuntimeError(f"latency run failed: {failures[0]}")
    dirs = [node.log_dir for node in cluster.nodes]
    stages = stage_latencies(dirs, sender=0, skip_s=args.latency_warmup)
    traced = (summarize_stages(message_stages(dirs, sender=0, skip_s=args.latency_warmup))
              if args.trace else None)
    return {"n": n, "report": reports[0], "receivers": reports[1:], "window": w,
            "failures": failures, "stages": stages, "traced_stages": traced}


def summarize_stages(rows: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per stage of ``trace_stages`` (and ``total``): samples, mean, p50 and p99 in s."""
    out: dict[str, dict[str, float]] = {}
    for name in [*STAGES, "total"]:
        values = [r[name] for r in rows]
        if values:
            out[name] = {"samples": len(values), "mean_s": sum(values) / len(values),
                         "p50_s": percentile(values, 0.5), "p99_s": percentile(values, 0.99)}
    return out


def traced_rows(n: int, report: Mapping[str, Any],
                traced: Mapping[str, Mapping[str, float]]) -> list[list[Any]]:
    """One row per stage of ``trace_stages``, then the client hops: the client's p50
    minus the daemons' (frame in to ordered) p50."""
    rows: list[list[Any]] = [
        [n, name, int(s["samples"]), s["mean_s"] * 1e3, s["p50_s"] * 1e3, s["p99_s"] * 1e3]
        for name, s in traced.items()
    ]
    total = traced.get("total")
    client = report.get("latency_p50_s")
    if total is not None and client is not None:
        rows.append([n, "client hops (client p50 - total p50)", None, None,
                     (client - total["p50_s"]) * 1e3, None])
    return rows


TRACED_COLUMNS = ["N", "stage", "samples", "mean ms", "p50 ms", "p99 ms"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = group_sizes(args.nodes, "--nodes", minimum=2)
    tmp = None
    if args.dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="amcast-bench-")
        base = Path(tmp.name)
    else:
        base = args.dir
    rows, lat_rows, sent_rows, recv_rows, stage_rows = [], [], [], [], []
    trace_rows: list[list[Any]] = []
    runs: list[dict[str, Any]] = []
    figures: dict[str, Any] = {}
    notes = [f"{os.cpu_count()} CPUs shared by all daemons and load generators",
             "rcvbuf errors: UDP RcvbufErrors of the whole host (/proc/net/snmp) in the window",
             "daemon wake-ups: the daemons' event loops blocking and woken up "
             "(voluntary_ctxt_switches of /proc/PID/status); CPU us/wake-up: the daemons' CPU "
             "over them"]
    if args.mode == "embedded":
        notes.append("embedded: each node is one application process embedding its member "
                     "(amcast.member.Member); 'daemon' CPU, core shares and wake-ups are "
                     "those processes, the load they generate included; there is no client "
                     "process and no idle run")
    try:
        for n in sizes:
            t = throughput(n, args, base)
            w = t["window"]
            rows.append(throughput_row(n, w, drops=sum(w["drops"].values()),
                                       idle=t["idle_core_share_max"],
                                       sent=t["sent_per_member"],
                                       disconnected=len(t["failures"])))
            sent_rows.append(datagram_row(n, "saturation", w, "sent"))
            recv_rows.append(datagram_row(n, "saturation", w, "received"))
            figures[f"N={n} ordered msgs/s (slowest node)"] = min(w["rates"])
            figures[f"N={n} per-node msgs/s"] = ", ".join(f"{r:,.0f}" for r in w["rates"])
            figures[f"N={n} CPU s/msg (all daemons)"] = w["cpu_per_msg_s"]
            notes.extend(f"N={n}: {line}" for line in t["failures"])
            notes.extend(f"N={n}: core: {line}" for line in w["cores"])
            run_: dict[str, Any] = {"n": n, "throughput": t}
            if not args.skip_latency:
                lat = latency(n, args, base)
                lw = lat["window"]
                lat_rows.append(latency_row(n, lat["report"], lw))
                stage_rows.append(stage_row(n, lat["report"], lat["stages"]))
                if lat["traced_stages"] is not None:
                    trace_rows.extend(traced_rows(n, lat["report"], lat["traced_stages"]))
                lat["stages"] = {k: {"samples": len(v), "p50_s": percentile(v, 0.5),
                                     "p99_s": percentile(v, 0.99)}
                                 for k, v in lat["stages"].items()}
                sent_rows.append(datagram_row(n, "light", lw, "sent"))
                recv_rows.append(datagram_row(n, "light", lw, "received"))
                figures[f"N={n} latency p50 ms"] = lat_rows[-1][2]
                figures[f"N={n} latency p99 ms"] = lat_rows[-1][3]
                figures[f"N={n} light-load daemon core %"] = ", ".join(
                    f"{100 * x:.1f}" for x in lw["core_shares"])
                notes.extend(f"N={n} latency run: {line}" for line in lat["failures"])
                run_["latency"] = lat
            runs.append(run_)
    finally:
        if tmp is not None:
            tmp.cleanup()
    lat_title = f"{args.latency_rate:.0f} msgs/s from node 0"
    return {
        "title": f"amcast bench cluster (W1): {args.size}-byte agreed messages, every node "
                 f"sending, {args.duration:.0f} s after {args.warmup:.0f} s warm-up"
                 f"{'' if args.receive else ', clients not receiving'}"
                 f"{', over UDP unicast' if args.transport == 'unicast' else ''}"
                 f"{', embedded members (no daemons)' if args.mode == 'embedded' else ''}",
        "tables": [
            {"title": "throughput (saturation)", "columns": THROUGHPUT_COLUMNS, "rows": rows},
            *([{"title": f"light load ({lat_title}, every node receiving; latency at the "
                         f"sender, the rest over {args.latency_duration:.0f} s after "
                         f"{args.latency_warmup:.0f} s warm-up)",
                "columns": LATENCY_COLUMNS, "rows": lat_rows},
               {"title": "where the light-load latency goes (delivery logs: vertex made at the "
                         "sender's daemon to ordered; the rest is the two client hops)",
                "columns": STAGE_COLUMNS, "rows": stage_rows}] if lat_rows else []),
            *([{"title": "light-load latency stage by stage (--trace: the sender's data "
                         "vertices, through the voter that decided; the tracing costs CPU)",
                "columns": TRACED_COLUMNS, "rows": trace_rows}] if trace_rows else []),
            {"title": "datagrams sent per ordered message (all daemons), by kind",
             "columns": DATAGRAM_COLUMNS, "rows": sent_rows},
            {"title": "datagrams received per ordered message (all daemons), by kind",
             "columns": DATAGRAM_COLUMNS, "rows": recv_rows},
        ],
        "figures": figures,
        "notes": notes,
        "runs": runs,
    }
