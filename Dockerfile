# The coordinator image: `coordinator serve` as a non-root user, configured by environment
# variables (COORDINATOR_<KEY>, see README "Configuration reference"), state in the /data volume.
#   docker build -t coordinator .
#   docker run -p 9092:9092 -p 9644:9644 -v coordinator-data:/data coordinator
# Admin CLI from the same image:
#   docker run --rm --entrypoint coordinator coordinator groups list --bootstrap host:9092
# Without Docker Hub, any image with Python 3.11 (`python` on PATH, the venv module) will do as the
# base; deploy/debian-base/build.sh makes one from Debian's packages:
#   docker build --build-arg PYTHON_IMAGE=coordinator-base:bookworm -t coordinator .
# No `# syntax=` line: it would make BuildKit fetch its frontend from Docker Hub.

ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

FROM base AS build
WORKDIR /src
COPY requirements.lock ./
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY coordinator ./coordinator
RUN /opt/venv/bin/pip install --no-deps . \
    && /opt/venv/bin/python -c "import coordinator.cli, uvloop, kio, re2, crc32c"

FROM base
RUN groupadd --system --gid 10001 coordinator \
    && useradd --system --uid 10001 --gid coordinator --no-create-home --home-dir /data coordinator \
    && mkdir -p /data \
    && chown coordinator:coordinator /data
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    COORDINATOR_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    COORDINATOR_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    COORDINATOR_METRICS_LISTEN=0.0.0.0:9644 \
    COORDINATOR_LOG_DIRS=/data
USER coordinator:coordinator
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9092 9644
# Ready means listeners open and state loaded; the port follows COORDINATOR_METRICS_LISTEN.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; port = os.environ.get('COORDINATOR_METRICS_LISTEN', '0.0.0.0:9644').rpartition(':')[2]; urllib.request.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=2)"]
# Exec form: the server is PID 1 and gets SIGTERM itself; it drains (shutdown.timeout.ms, 10 s by
# default) and exits 0, so give `docker stop` a longer grace period (-t 15 / stop_grace_period).
STOPSIGNAL SIGTERM
ENTRYPOINT ["coordinator", "serve"]
