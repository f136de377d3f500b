# amcastd container image (multi-stage).
# Build: docker build --target amcastd-native -t amcast:latest .   (what compose builds)
#   target `amcastd`: the daemon and the amcast CLI, non-root, no compiler.
#   target `amcastd-native`: the same, with the protocol core compiled by mypyc (`make
#     native`: about 1.2 to 1.8 times faster at light load). It is compiled in a stage
#     of its own on BUILD_IMAGE, an image with a C compiler and the headers of the same
#     Python 3.11 as BASE_IMAGE; the image itself has no compiler either.
#   target `analytics`: adds Java 17 and PySpark for `amcast analyze` (one-shot jobs).
# Dependencies come pinned from requirements.lock / requirements-analytics.lock
# (`make lock` regenerates them from pyproject.toml).
# Where Docker Hub or PyPI cannot be reached (`make container-test` does this):
#   --build-arg BASE_IMAGE=amcast-base:bookworm   a Debian base made locally
#                                                 (deploy/container/base-image.sh)
#   --build-arg BUILD_IMAGE=amcast-build-base:bookworm
#                                                 the same with gcc and Python's headers
#                                                 (base-image.sh --build)
#   --build-arg PIP_OPTS="--no-index --find-links http://127.0.0.1:8765/"
#                                                 a local wheel cache
#                                                 (deploy/container/wheelhouse.sh)
# The analytics wheels are built in their own stage, after `amcastd`, so that building
# the daemon's image does not need them.

ARG BASE_IMAGE=python:3.11-slim
ARG BUILD_IMAGE=python:3.11

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

# The compiled protocol core: the ordinary wheel installed with mypy (the `native` extra),
# its hot modules compiled in place, then packed as a platform wheel
# (deploy/build_native.py --wheel --from-wheel: no git checkout here).
FROM ${BUILD_IMAGE} AS build-native
ARG PIP_OPTS=""
COPY --from=build /wheels /wheels
COPY deploy/build_native.py /build_native.py
RUN pip install --no-cache-dir $PIP_OPTS --find-links /wheels "$(ls /wheels/amcast-*.whl)[native]" \
 && python /build_native.py \
 && python /build_native.py --wheel /wheels-native --from-wheel "$(ls /wheels/amcast-*.whl)"

FROM amcastd AS amcastd-native
USER root
COPY --from=build-native /wheels-native /wheels
RUN pip install --no-cache-dir --no-deps --force-reinstall /wheels/*.whl && rm -rf /wheels \
 && python -c 'from amcast.daemon import native; s = native.state(); \
assert native.problem() is None and s["protocol_core"] == "compiled", s'
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
