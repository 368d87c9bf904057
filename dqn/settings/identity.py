"""A replicated actor's stable id: the replica number in its name under Kubernetes and Docker Compose.

- Kubernetes StatefulSet (deploy/k8s/base/actor.yaml): the hostname is the pod name `<name>-<ordinal>`, e.g.
  `actor-3` -> 3. Ordinals are 0..N-1 and survive pod recreation.
- Docker Compose: the hostname is the container's random id, but the container is named
  `<project>-<service>-<replica>` (replicas 1..N; scaling down removes the highest, scaling up refills the gaps).
  Docker's embedded DNS (nameserver 127.0.0.11) answers a reverse (PTR) query for the container's own address with
  `<container name>.<network>`, e.g. `dqn-service-actor-2.dqn-service_replay` -> 2. /etc/hosts maps that address to
  the hostname, so the query goes to the DNS server directly rather than through the C library.
- Anything else: crc32 of the hostname (stable while the hostname is).
"""

import logging
import re
import socket
import zlib

log = logging.getLogger(__name__)

DOCKER_DNS = "127.0.0.11"  # the engine's embedded DNS server in every container on a user-defined network
_REPLICA = re.compile(r"^[a-z0-9][-a-z0-9_]*-(?P<n>\d+)$")  # Compose project names may hold "_"
_CONTAINER_ID = re.compile(r"^[0-9a-f]{12}$")


def replica_number(name: str) -> int | None:
    """The trailing `-<number>` of a pod or container name (first DNS label only), or None."""
    match = _REPLICA.match(name.split(".", 1)[0].lower())
    return int(match["n"]) if match else None


def uses_docker_dns(resolv_conf: str = "/etc/resolv.conf") -> bool:
    """Whether this container resolves names through Docker's embedded DNS server."""
    try:
        with open(resolv_conf) as f:
            return any(line.split()[:2] == ["nameserver", DOCKER_DNS] for line in f if line.strip())
    except OSError:
        return False


def docker_container_name(timeout_s: float = 2.0) -> str | None:
    """The container's name from Docker's DNS (PTR of its own address), or None outside Docker or on no answer."""
    import dns.exception
    import dns.resolver
    import dns.reversename

    try:
        address = socket.gethostbyname(socket.gethostname())  # /etc/hosts: the container's address
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = [DOCKER_DNS]
        answer = resolver.resolve(dns.reversename.from_address(address), "PTR", lifetime=timeout_s)
        return str(answer[0].target).rstrip(".")
    except (OSError, dns.exception.DNSException) as e:
        log.warning("no container name from Docker's DNS (%s); the actor id falls back to the hostname", e)
        return None


def stable_actor_id(hostname: str | None = None) -> int:
    """The replica number of this process's pod or container, else crc32(hostname) % 1e6 (see the module doc)."""
    hostname = hostname or socket.gethostname()
    number = replica_number(hostname)
    if number is not None:
        return number
    if _CONTAINER_ID.match(hostname) and uses_docker_dns():
        name = docker_container_name()
        number = replica_number(name) if name else None
        if number is not None:
            return number
    return zlib.crc32(hostname.encode()) % 1_000_000
