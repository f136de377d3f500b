#!/bin/bash
# Build .w1dev/ (git-ignored through .git/info/exclude): everything W1 beside JGroups and
# Corosync needs on a bare x86-64 machine with Python 3.12 and no package index, such as the
# 16-core `device` machine (Ubuntu 24.04, no iproute2, no Java, no Corosync):
#   whl/        cp312 wheels of requirements.lock, of amcast and of its native core (abi3)
#   jre.tar.xz  a jlink'd OpenJDK 17 runtime with the modules JGroups 2.12 and W1Member use
#   cs/         corosync, corosync-cmapctl and ip (iproute2) from this Debian 12 host with
#               every library they load but libc/libm, behind wrappers that set LD_LIBRARY_PATH
#   ul/         setpriv, nsenter and unshare the same way (used only where missing)
#   peers/      ../shared/peers patched with docs/perf/w1-harness.patch, members compiled here
#   jgroups.jar, dev.sh (= docs/perf/w1-device/run.sh)
# Needs the harness's Debian packages here (../shared/peers/run.sh installs them) and `make
# install`. Then: device run, carry [".w1dev"], command `bash .w1dev/dev.sh [REGEX]`.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
B=.w1dev
PYVER=${PYVER:-3.12}
grep -qx '/.w1dev/' .git/info/exclude 2>/dev/null || echo '/.w1dev/' >> .git/info/exclude
rm -rf "$B"; mkdir -p "$B/whl"

echo "wheels for cp${PYVER/./}"
plat=()  # pip prefers the first platform that fits: the wheels run on the device were 2_28's
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux1_x86_64 manylinux_2_34_x86_64 manylinux_2_31_x86_64; do plat+=(--platform "$p"); done
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" \
  --implementation cp "${plat[@]}" -d "$B/whl" -r requirements.lock
.venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w "$B/whl" .
# the native core as an abi3 wheel (`make wheel`), when this host can build it
if command -v cargo >/dev/null; then make -s wheel >/dev/null && cp dist/amcast_native-*-abi3-*.whl "$B/whl/"; fi
rm -rf build  # setuptools' staging copy: it keeps files a later checkout removed

echo "JRE"
JDK=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
"$JDK/bin/jlink" --add-modules java.base,java.desktop,java.management,java.naming,java.rmi,java.sql,jdk.management,java.logging,java.xml,jdk.unsupported \
  --strip-debug --no-header-files --no-man-pages --output "$B/jre"
strip --strip-unneeded "$B"/jre/lib/server/libjvm.so "$B"/jre/lib/*.so
tar -C "$B" -cf - jre | xz -9 -T0 > "$B/jre.tar.xz"
rm -rf "$B/jre"

bundle() {  # bundle DIR ELF BINARY...: the binaries, their and ELF's libraries (not libc, libm,
  local d=$B/$1 elf=$2; shift 2  # the loader), wrappers
  mkdir -p "$d/bin" "$d/real" "$d/lib"
  cat > "$d/wrap.sh" <<'WRAP'
#!/bin/sh
# run the bundled binary of this name with the bundled libraries (Debian 12 builds)
d=$(dirname "$(dirname "$(readlink -f "$0")")")
LD_LIBRARY_PATH="$d/lib" exec "$d/real/$(basename "$0")" "$@"
WRAP
  for b in "$@"; do
    cp "$(command -v "$b")" "$d/real/"
    install -m 755 "$d/wrap.sh" "$d/bin/$(basename "$b")"
  done
  for b in "$d"/real/* $elf; do ldd "$b" | awk '$3 ~ /^\// {print $3}'; done | sort -u \
    | grep -v -E '/(libc|libm)\.so|ld-linux' | xargs -r -I{} cp -L {} "$d/lib/"
}
echo "corosync, iproute2, util-linux"
mkdir -p "$B/peers"
cp -a ../shared/peers/. "$B/peers/"
rm -rf "$B/peers/results/raw" "$B/peers/.venv" "$B/peers/jgroups/build" "$B/peers/corosync/build"
if patch -s -N --dry-run -d "$B/peers" -p1 < docs/perf/w1-harness.patch >/dev/null 2>&1; then
  patch -s -N -d "$B/peers" -p1 < docs/perf/w1-harness.patch
else
  echo "docs/perf/w1-harness.patch does not apply: the peer harness has it already"
fi
mkdir -p "$B/peers/jgroups/build" "$B/peers/corosync/build"
javac -nowarn -cp /usr/share/java/jgroups.jar -d "$B/peers/jgroups/build" "$B/peers/jgroups/W1Member.java"
gcc -O2 -Wall -o "$B/peers/corosync/build/w1_cpg.real" "$B/peers/corosync/w1_cpg.c" -lcpg -lpthread
cat > "$B/peers/corosync/build/w1_cpg" <<'WRAP'
#!/bin/sh
LD_LIBRARY_PATH="$W1_CS_LIB" exec "$(dirname "$(readlink -f "$0")")/w1_cpg.real" "$@"
WRAP
chmod +x "$B/peers/corosync/build/w1_cpg"
bundle cs "$B/peers/corosync/build/w1_cpg.real" corosync corosync-cmapctl ip
bundle ul "" setpriv nsenter unshare
cp /usr/share/java/jgroups.jar "$B/"
install -m 755 docs/perf/w1-device/run.sh "$B/dev.sh"
du -sh "$B"
