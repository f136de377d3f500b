# amcastd container image (multi-stage). Build: docker build -t amcast .
#   target `amcastd` (default): the daemon and the amcast CLI, non-root, no compiler.
#   target `analytics`: adds Java 17 and PySpark for `amcast analyze` (one-shot jobs).
# Dependencies come pinned from requirements.lock / requirements-analytics.lock
# (`make lock` regenerates them from pyproject.toml).
# Where Docker Hub or PyPI cannot be reached (`make container-test` does this):
#   --build-arg BASE_IMAGE=amcast-base:bookworm   a Debian base made locally
#                                                 (deploy/container/base-image.sh)
#   --build-arg PIP_OPTS="--no-index --find-links http://127.0.0.1:8765/"
#                                                 a local wheel cache
#                                                 (deploy/container/wheelhouse.sh)
# The analytics wheels are built in their own stage, after `amcastd`, so that building
# the daemon's image does not need them.

ARG BASE_IMAGE=python:3.11-slim

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
