#!/usr/bin/env bash
# Local images from Debian's packages, for a Docker engine that cannot pull from Docker Hub:
#   coordinator-base:bookworm        Debian 12 minbase + python3 (3.11) + venv: the image's base
#   coordinator-prometheus:bookworm  that base + Debian's prometheus package (prometheus.Dockerfile)
# Then:
#   PYTHON_IMAGE=coordinator-base:bookworm PROMETHEUS_IMAGE=coordinator-prometheus:bookworm \
#     docker compose up --build -d coordinator prometheus
# Needs root, debootstrap (install-docker.sh installs it) and a Debian mirror (DEBIAN_MIRROR,
# default deb.debian.org). Certificate authorities the host added locally (HOST_CA_DIR, default
# /usr/local/share/ca-certificates; empty to skip) are trusted inside the base too, so that pip and
# apt work behind a TLS-inspecting proxy.
# Usage: deploy/debian/build.sh [BASE_IMAGE [PROMETHEUS_IMAGE]]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${1:-coordinator-base:bookworm}
prometheus=${2:-coordinator-prometheus:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ca_dir=${HOST_CA_DIR-/usr/local/share/ca-certificates}

for tool in debootstrap docker tar; do
    command -v "$tool" >/dev/null || { echo "build.sh: $tool is not installed" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "build.sh: debootstrap needs root" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# python-is-python3: the Dockerfile and its HEALTHCHECK call `python`, as in the python images.
debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    bookworm "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; rm -f "$root.log"; echo "build.sh: debootstrap failed" >&2; exit 1; }
rm -f "$root.log"
if [ -n "$ca_dir" ] && compgen -G "$ca_dir/*.crt" >/dev/null; then
    cp "$ca_dir"/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
# pip uses its own certificate bundle unless told otherwise; this makes it use the system's.
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
    -c 'ENV LANG=C.UTF-8' \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["python3"]' - "$base" >/dev/null
echo "built $base"

docker build -q --build-arg BASE="$base" -t "$prometheus" -f "$here/prometheus.Dockerfile" "$here" >/dev/null
echo "built $prometheus"
