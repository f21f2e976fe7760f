# Prometheus from Debian's package, for the compose stack where prom/prometheus cannot be pulled.
# Built by deploy/debian/build.sh on its Debian base; used as PROMETHEUS_IMAGE. Like prom/prometheus,
# the entrypoint is the server and compose's `command` gives its flags.
ARG BASE=coordinator-base:bookworm
FROM ${BASE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus \
    && chown prometheus:prometheus /prometheus
USER prometheus
WORKDIR /prometheus
VOLUME ["/prometheus"]
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
