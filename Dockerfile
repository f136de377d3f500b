# amcastd container image (multi-stage).
# Build: docker build --target amcastd-native -t amcast:latest .   (what compose builds)
#   target `amcastd`: the daemon and the amcast CLI, non-root, no compiler, pure-Python core.
#   target `amcastd-native`: the same with the native data path (native/, Rust, the
#     extension module amcast_native; docs/native.md). The crate is built by maturin as an
#     abi3 wheel in a stage of its own on RUST_IMAGE (the Rust project's image, Debian 12);
#     the image itself has no compiler.
#   target `analytics`: adds Java 17 and PySpark for `amcast analyze` (one-shot jobs).
# Dependencies come pinned from requirements.lock / requirements-analytics.lock
# (`make lock` regenerates them from pyproject.toml).
# Where Docker Hub or PyPI cannot be reached (`make container-test` does this):
#   --build-arg BASE_IMAGE=amcast-base:bookworm   a Debian base made locally
#                                                 (deploy/container/base-image.sh)
#   --build-arg PIP_OPTS="--no-index --find-links http://127.0.0.1:8765/"
#                                                 a local wheel cache
#                                                 (deploy/container/wheelhouse.sh)
#   --build-arg RUST_IMAGE=amcast-base:bookworm --build-arg NATIVE_PREBUILT=1
#                                                 no toolchain in the build: the
#                                                 amcast-native wheel comes from that
#                                                 cache (`make wheel` on a host with cargo)
# The analytics wheels are built in their own stage, after `amcastd`, so that building
# the daemon's image does not need them.

ARG BASE_IMAGE=python:3.11-slim
ARG RUST_IMAGE=rust:1-bookworm

FROM ${BASE_IMAGE} AS build
ARG PIP_OPTS=""
WORKDIR /src
RUN pip install --no-cache-dir $PIP_OPTS --upgrade pip wheel
COPY requirements.lock requirements-analytics.lock ./
RUN pip wheel --no-cache-dir $PIP_OPTS --wheel-dir /wheels -r requirements.lock
COPY pyproject.toml README.md ./
COPY amcast ./amcast
COPY protocols ./protocols
COPY daemon ./daemon
COPY analytics ./analytics
RUN pip wheel --no-cache-dir $PIP_OPTS --no-deps --wheel-dir /wheels .

FROM ${BASE_IMAGE} AS amcastd
RUN groupadd --system --gid 999 amcast \
 && useradd --system --uid 999 --gid amcast --home-dir /var/lib/amcast --shell /usr/sbin/nologin amcast \
 && install -d -o amcast -g amcast -m 0750 /run/amcast /var/lib/amcast /var/log/amcast /etc/amcast \
 && install -d -o amcast -g amcast -m 0700 /etc/amcast/keys
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels /wheels/*.whl && rm -rf /wheels
COPY config/amcastd.toml /etc/amcast/amcastd.toml
ENV AMCAST_CONFIG=/etc/amcast/amcastd.toml \
    AMCAST_API__SOCKET=/run/amcast/amcastd.sock \
    AMCAST_LOGS__DIR=/var/log/amcast \
    AMCAST_LOGS__FORMAT=json \
    AMCAST_SECURITY__KEY_FILE=/etc/amcast/keys/authkey \
    PYTHONUNBUFFERED=1
USER amcast
EXPOSE 9464
VOLUME ["/var/log/amcast"]
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["amcast", "status", "--socket", "/run/amcast/amcastd.sock", "--health"]
STOPSIGNAL SIGTERM
CMD ["amcastd", "--config", "/etc/amcast/amcastd.toml"]

# The native data path: the crate built as an abi3 wheel for CPython 3.11 and later
# (`make wheel`), with Cargo.lock's versions; or, with NATIVE_PREBUILT, that wheel taken
# from the index PIP_OPTS names.
FROM ${RUST_IMAGE} AS build-native
ARG PIP_OPTS=""
ARG NATIVE_PREBUILT=""
WORKDIR /src
RUN python3 -m venv /tools 2>/dev/null || { apt-get update \
 && apt-get install -y --no-install-recommends python3-venv \
 && rm -rf /var/lib/apt/lists/* /tools && python3 -m venv /tools; }
COPY native ./native
RUN if [ -n "$NATIVE_PREBUILT" ]; then \
      /tools/bin/pip download --no-cache-dir --no-deps $PIP_OPTS --dest /wheels-native \
        "amcast-native==$(sed -n 's/^version = "\(.*\)"/\1/p' native/pyproject.toml)"; \
    else \
      /tools/bin/pip install --no-cache-dir $PIP_OPTS 'maturin>=1.5,<2' \
      && /tools/bin/maturin build --release --locked -m native/Cargo.toml --out /wheels-native; \
    fi

FROM amcastd AS amcastd-native
USER root
COPY --from=build-native /wheels-native /wheels
RUN pip install --no-cache-dir --no-deps /wheels/*.whl && rm -rf /wheels \
 && python -c 'from amcast.protocols.wire import native; \
assert native.core_name() == "native", "amcast_native did not load"'
USER amcast

FROM build AS build-analytics
ARG PIP_OPTS=""
RUN pip wheel --no-cache-dir $PIP_OPTS --wheel-dir /wheels-analytics -r requirements-analytics.lock

FROM amcastd AS analytics
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build-analytics /wheels-analytics /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels /wheels/*.whl && rm -rf /wheels
USER amcast
HEALTHCHECK NONE
CMD ["amcast", "analyze", "/var/log/amcast", "--out", "/reports"]
