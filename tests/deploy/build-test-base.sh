#!/usr/bin/env bash
# TEST ONLY: a stand-in for the Dockerfile's base image where no image registry is reachable.
#
#   tests/deploy/build-test-base.sh TAG [CACHE_DIR]
#
# Builds a Debian bookworm root fs with debootstrap (Python 3.11, venv, pip, CA certificates) and imports it into
# the engine that `docker` talks to (DOCKER_HOST) as TAG. The stand-in also trusts this machine's local CA
# certificates and uses this machine's pip index settings, so that `pip install` inside the build reaches the same
# package index as the host. None of that is in deploy/Dockerfile: the shipped image is built from python:3.11-slim.
# The root fs tarball is kept in CACHE_DIR (keyed by this script's content) so that later runs skip debootstrap.
set -euo pipefail
tag=${1:?usage: build-test-base.sh TAG [CACHE_DIR]}
cache_dir=${2:-/var/cache/dqn-service-test-base}
suite=bookworm
mirror=${DQN_TEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$tag" >/dev/null 2>&1; then
    exit 0
fi
if ! command -v debootstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
fi

key=$(sha256sum "$0" | cut -c1-12)
tarball=$cache_dir/$suite-python3.11-$key.tar
if [ ! -s "$tarball" ]; then
    root=$(mktemp -d /var/tmp/dqn-test-base.XXXXXX)
    trap 'umount -R -l "$root"/proc "$root"/sys "$root"/dev 2>/dev/null || true; rm -rf "$root"' EXIT
    debootstrap --variant=minbase --include=python3.11,python3.11-venv,python3-pip,ca-certificates \
        "$suite" "$root" "$mirror" >&2
    # python:3.11-slim answers to `python`; the Dockerfile runs `python -m venv`.
    ln -sf /usr/bin/python3.11 "$root/usr/local/bin/python"
    # This machine's local CAs (e.g. a package-index proxy), trusted inside the stand-in only.
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
        chroot "$root" update-ca-certificates >/dev/null
    fi
    # The same index settings as the host's pip; local file:// indexes and find-links are not in the image.
    {
        echo "[global]"
        echo "cert = /etc/ssl/certs/ca-certificates.crt"
        for name in index-url extra-index-url trusted-host; do
            value=$(pip config get "global.$name" 2>/dev/null || true)
            env_name=PIP_$(echo "$name" | tr 'a-z-' 'A-Z_')
            value=${!env_name:-$value}
            value=$(echo "$value" | tr ' ' '\n' | { grep -v '^file:' || true; } | tr '\n' ' ' | sed 's/ *$//')
            if [ -n "$value" ]; then echo "$name = $value"; fi
        done
    } > "$root/etc/pip.conf"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    mkdir -p "$cache_dir"
    tar -C "$root" --numeric-owner -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
fi
docker import \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    "$tarball" "$tag" >/dev/null
