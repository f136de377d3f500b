#!/bin/bash
# W1 beside JGroups and Corosync on the 16-core device machine, from a carried bundle:
# Debian 12 builds of corosync/libknet/libqb/iproute2 (own libraries, wrappers on PATH), a
# jlink'd JRE 17, cp312 wheels of amcast and its dependencies, the patched peer harness.
# Usage (repo root): bash .w1dev/dev.sh [CONFIG-REGEX] ; BUDGET_S bounds the W1 part.
set -u
W=$(readlink -f "$(dirname "$0")")
REPO=$(dirname "$W")
OUT=${OUT:-/tmp/w1out}; mkdir -p "$OUT"
FILTER=${1:-.}
BUDGET_S=${BUDGET_S:-430}
WARMUP=${WARMUP:-3}; DURATION=${DURATION:-10}
PY=${W1_PYTHON:-$(command -v python3)}
exec > >(tee "$OUT/device.log") 2>&1
t0=$(date +%s)
echo "== machine: $(nproc) cores, kernel $(uname -r), $(. /etc/os-release; echo "$PRETTY_NAME"), $($PY -V), $(date -u +%FT%TZ)"
grep -m1 'model name' /proc/cpuinfo

# util-linux tools the harness uses; bundled copies only where missing
for t in setpriv nsenter unshare; do
  command -v $t >/dev/null || { echo "bundled $t"; mkdir -p /tmp/ulbin; ln -sf "$W/ul/bin/$t" /tmp/ulbin/$t; }
done
export PATH="$W/cs/bin:/tmp/ulbin:$PATH" W1_CS_LIB="$W/cs/lib"

# amcast and its dependencies
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$W"/whl/*.whl || exit 3
mkdir -p /tmp/amc/bin
printf '#!/bin/sh\nPYTHONPATH=/tmp/site exec %s "$@"\n' "$PY" > /tmp/amc/bin/python
printf '#!/bin/sh\nPYTHONPATH=/tmp/site exec %s -m amcast.daemon.main "$@"\n' "$PY" > /tmp/amc/bin/amcastd
chmod +x /tmp/amc/bin/*
# the source tree would shadow the installed package (its amcast/ lacks the mapped daemon/)
export W1_AMCAST_SRC=/tmp/amc W1_AMCAST_PY=/tmp/amc/bin/python
(cd /tmp/amc && /tmp/amc/bin/python -c 'import amcast, amcast.daemon.main, amcast.client; print("amcast from", amcast.__file__)') || exit 3

# JRE and JGroups
if ! command -v java >/dev/null || [ -n "${W1_BUNDLED_JRE:-}" ]; then
  [ -x /tmp/w1jre/jre/bin/java ] || "$PY" -c 'import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$W/jre.tar.xz" /tmp/w1jre
  export PATH="/tmp/w1jre/jre/bin:$PATH"
fi
mkdir -p /usr/share/java
cmp -s "$W/jgroups.jar" /usr/share/java/jgroups.jar || cp "$W/jgroups.jar" /usr/share/java/jgroups.jar
java -version 2>&1 | head -1

# socket buffers: the 2-core host's 4 MiB (the harness and amcast ask for more; record both)
echo "rmem_max/wmem_max before: $(cat /proc/sys/net/core/rmem_max) $(cat /proc/sys/net/core/wmem_max)"
[ "$(cat /proc/sys/net/core/rmem_max)" -lt 4194304 ] && echo 4194304 > /proc/sys/net/core/rmem_max
[ "$(cat /proc/sys/net/core/wmem_max)" -lt 4194304 ] && echo 4194304 > /proc/sys/net/core/wmem_max
echo "rmem_max/wmem_max now: $(cat /proc/sys/net/core/rmem_max) $(cat /proc/sys/net/core/wmem_max)"

# probes: a private namespace with lo multicast, and the bridge/veth corosync-cpg needs
cd "$W/peers"
NETNS=./netns.sh
./netns.sh sh -c 'ip -o addr show lo; ip route show table all | grep 224' \
  || { echo "!! netns.sh failed: running in this namespace, on lo"; NETNS=; }
./netns.sh sh -c 'ip link add w1pbr type bridge && ip link add w1pv type veth peer name w1pv2 && echo "bridge+veth: ok"' \
  || echo "!! bridge/veth unavailable: corosync-cpg configs will fail"

R=/tmp/w1raw/raw; rm -rf "$R"; mkdir -p "$R"   # tarred into $OUT after each config
echo "# run started $(date -u +%FT%TZ) on $(nproc) cores; REPS=1 WARMUP=$WARMUP DURATION=$DURATION" >> "$R/log.txt"
cfg() {  # cfg NAME driver-args...
  local name=$1; shift
  [[ $name =~ $FILTER ]] || return 0
  local el=$(( $(date +%s) - t0 ))
  if [ $el -gt "$BUDGET_S" ]; then echo "-- skipped $name (budget: ${el}s)"; return 0; fi
  echo "== $name (t+${el}s)" | tee -a "$R/log.txt"
  timeout --signal=KILL 90 $NETNS "$PY" driver.py "$@" --reps 1 --warmup "$WARMUP" --duration "$DURATION" \
    --out "$R/$name.jsonl" 2>&1 | tee -a "$R/log.txt" | grep -v '^ *$' | tail -4 \
    || echo "!! $name: driver exited non-zero"
  tar -czf "$OUT/raw.tar.gz" -C /tmp/w1raw raw
}
for n in 4 8 16; do
  cfg amcast-n$n-tput                      --system amcast --n $n --mode tput
  cfg jgroups-seq-n$n-tput-credits200K     --system jgroups-seq --n $n --mode tput --extra credits=200K
  cfg corosync-cpg-n$n-tput-norr           --system corosync-cpg --n $n --mode tput --extra norr
  cfg amcast-n$n-lat                       --system amcast --n $n --mode lat --rate 1000
  cfg jgroups-seq-n$n-lat-nobundle         --system jgroups-seq --n $n --mode lat --rate 1000 --extra nobundle
  cfg corosync-cpg-n$n-lat-norr            --system corosync-cpg --n $n --mode lat --rate 1000 --extra norr
done
"$PY" summarize.py "$R" > "$OUT/summary.md" 2>&1; cp "$OUT/summary.md" "$R/summary.md"
echo "== W1 done at t+$(( $(date +%s) - t0 ))s"

# idle daemons and a short saturation check with the project's own bench (amcast alone)
if [ -z "${SKIP_IDLE:-}" ] && [ $(( $(date +%s) - t0 )) -lt $(( BUDGET_S + 40 )) ]; then
  cd /tmp/amc
  timeout --signal=KILL 75 ${NETNS:+"$W/peers/netns.sh"} /tmp/amc/bin/python -m amcast bench cluster --nodes 4,8,16 \
    --idle 8 --duration 1 --warmup 0.5 --skip-latency --json > "$OUT/bench-idle.json" 2> "$OUT/bench-idle.err" \
    && echo "bench idle: ok" || { echo "!! bench idle failed"; tail -5 "$OUT/bench-idle.err"; }
fi
tar -czf "$OUT/raw.tar.gz" -C /tmp/w1raw raw
echo "== all done at t+$(( $(date +%s) - t0 ))s"
