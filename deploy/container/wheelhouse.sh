#!/bin/sh
# A local wheel cache for building the image where PyPI cannot be reached from the build:
# every wheel of requirements.lock (and, with ANALYTICS=1, requirements-analytics.lock),
# plus pip, wheel and setuptools for the build stage and mypy (pyproject's `native`
# extra) for the build-native stage, downloaded with this host's pip.
#   deploy/container/wheelhouse.sh DIR          (PYTHON: a Python 3.11, as in the image)
# Serve DIR over HTTP where the build runs and pass
#   --build-arg PIP_OPTS="--no-index --find-links http://HOST:PORT/"
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
native=$("$PYTHON" -c 'import sys, tomllib
print(*tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["native"])' \
    "$HERE/pyproject.toml")
"$PYTHON" -m pip download --quiet --only-binary=:all: --dest "$DIR" "$@" \
    pip wheel "setuptools>=77" $native
echo "wheelhouse $DIR: $(ls "$DIR" | wc -l) wheels"
