#!/bin/sh
# A local wheel cache for building the image where PyPI cannot be reached from the build:
# every wheel of requirements.lock (and, with ANALYTICS=1, requirements-analytics.lock),
# plus pip, wheel and setuptools for the build stage, downloaded with this host's pip,
# and the native data path's abi3 wheel (amcast-native), built here by maturin
# (MATURIN, default: maturin on PATH, else the checkout's .venv; cargo must be there).
#   deploy/container/wheelhouse.sh DIR          (PYTHON: a Python 3.11, as in the image)
# Serve DIR over HTTP where the build runs and pass
#   --build-arg PIP_OPTS="--no-index --find-links http://HOST:PORT/"
#   --build-arg RUST_IMAGE=<the base image> --build-arg NATIVE_PREBUILT=1
set -eu
DIR=${1:?usage: wheelhouse.sh DIR}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$version" != "3.11" ]; then
    echo "wheelhouse: $PYTHON is Python $version; the image runs 3.11 (set PYTHON)" >&2
    exit 2
fi
mkdir -p "$DIR"
set -- -r "$HERE/requirements.lock"
if [ -n "${ANALYTICS:-}" ]; then set -- "$@" -r "$HERE/requirements-analytics.lock"; fi
"$PYTHON" -m pip download --quiet --only-binary=:all: --dest "$DIR" "$@" \
    pip wheel "setuptools>=77"
MATURIN=${MATURIN:-$(command -v maturin || echo "$HERE/.venv/bin/maturin")}
"$MATURIN" build --quiet --release --locked -m "$HERE/native/Cargo.toml" --out "$DIR"
echo "wheelhouse $DIR: $(ls "$DIR" | wc -l) wheels"
