#!/usr/bin/env bash
# Gets a Docker engine ready for the image tests (tests/test_docker_image.py), on Debian as root or
# with sudo: installs Debian's docker.io and debootstrap where missing, starts dockerd where none
# answers, and makes the local base image sqlenv-base:bookworm (Debian bookworm with Python 3.11,
# made by debootstrap, so no registry pull is needed) unless it exists. Does nothing where there
# is no apt-get (the image tests then skip, saying why).
set -euo pipefail
BASE_IMAGE=${SQLENV_DOCKER_BASE_IMAGE:-sqlenv-base:bookworm}
if ! command -v apt-get >/dev/null; then
  echo "install_docker.sh: no apt-get here; the Docker image tests will skip" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
# Debian's docker.io brings its own client, /usr/bin/docker: it builds with the engine's BuildKit
# (a docker CLI without the buildx plugin cannot).
if [ ! -x /usr/sbin/dockerd ] || [ ! -x /usr/bin/docker ] || ! command -v debootstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq docker.io debootstrap >/dev/null 2>&1 || {
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq docker.io debootstrap >/dev/null
  }
fi
DOCKER=/usr/bin/docker
if ! $SUDO $DOCKER info >/dev/null 2>&1; then
  # No init system runs services here: start the daemon in the background, logging beside /tmp.
  $SUDO setsid nohup /usr/sbin/dockerd >/tmp/sqlenv-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    if $SUDO $DOCKER info >/dev/null 2>&1; then break; fi
    sleep 1
  done
  $SUDO $DOCKER info >/dev/null || { echo "dockerd did not start: see /tmp/sqlenv-dockerd.log" >&2; exit 1; }
fi
if [ "$BASE_IMAGE" = "sqlenv-base:bookworm" ] && ! $SUDO $DOCKER image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  ROOT=$(mktemp -d)
  $SUDO debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$ROOT/fs" http://deb.debian.org/debian >/dev/null
  $SUDO rm -rf "$ROOT/fs/var/cache/apt/archives"/*.deb "$ROOT/fs/var/lib/apt/lists"/*
  $SUDO tar -C "$ROOT/fs" -c . | $SUDO $DOCKER import - "$BASE_IMAGE" >/dev/null
  $SUDO rm -rf "$ROOT"
fi
