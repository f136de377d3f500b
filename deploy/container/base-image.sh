#!/bin/sh
# Builds a local stand-in for the python:3.11-slim base image where Docker Hub cannot be
# reached: Debian bookworm (minbase) bootstrapped with debootstrap from a Debian mirror,
# with Python 3.11 in a virtual environment at /opt/python, first on PATH, so that `python`
# and `pip` behave as in the official image. Imported into the Docker engine as $IMAGE.
#   deploy/container/base-image.sh [IMAGE]      (default amcast-base:bookworm)
# Needs root, debootstrap and a reachable Debian mirror (DEBIAN_MIRROR). Does nothing when
# the image is already there (FORCE=1 rebuilds it).
set -eu
PACKAGES=python3,python3-venv,ca-certificates
DEFAULT=amcast-base:bookworm
IMAGE=${1:-$DEFAULT}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ -z "${FORCE:-}" ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "base image $IMAGE: already built"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "base-image: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 2; }
ROOT=$(mktemp -d /var/tmp/amcast-base.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
echo "base image $IMAGE: debootstrap bookworm from $MIRROR (a few minutes)"
debootstrap --variant=minbase --include="$PACKAGES" \
    bookworm "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || { tail -20 "$ROOT.log" >&2; exit 1; }
rm -f "$ROOT.log"
chroot "$ROOT" python3 -m venv /opt/python
chroot "$ROOT" /opt/python/bin/python -c 'import sys, pip; print("python", sys.version.split()[0], "pip", pip.__version__)'
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/tmp/*
tar -C "$ROOT" -c . | docker import \
    --change 'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$IMAGE" >/dev/null
echo "base image $IMAGE: built"
