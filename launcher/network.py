"""`local`'s roles in a network namespace of their own, so that nothing of a local run is reachable from another host.

Reverb's server takes a port and no address: it listens on every interface, IPv4 and IPv6. `local` therefore
forks every role from a forkserver that first moves into a new network namespace with only its loopback up
(`launcher/forkserver_network.py`): the roles reach each other on that loopback and no other host, nor the host
itself, reaches their ports. A user who is not root also gets a user namespace that maps only their own uid and
gid, which is what lets the kernel grant the network namespace; files keep their owner. TensorBoard stays on the
host's 127.0.0.1, where a browser on this machine reaches it.

Where the kernel refuses (no user namespaces, a container without the capability), or with `--isolate-network
false`, the roles run on the host's network, and `local` says so in a warning line that names the exposed port.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
import struct

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(ctypes.c_int(flags)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"unshare: {os.strerror(code)}")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


def _loopback_up() -> None:
    """Brings `lo` up (a new network namespace starts with it down), with the ioctl `ip link set lo up` uses."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def enter_private_network() -> None:
    """Moves this process, which must have one thread, into a new network namespace with only loopback, up.

    Root needs only the network namespace. Anyone else first enters a new user namespace in which their uid and
    gid map to themselves; it grants the capabilities the network namespace needs, inside it only.
    """
    if os.geteuid() == 0:
        try:
            _unshare(CLONE_NEWNET)
            _loopback_up()
            return
        except OSError as error:
            if error.errno != errno.EPERM:  # a root without CAP_SYS_ADMIN tries the user namespace below
                raise
    uid, gid = os.geteuid(), os.getegid()
    _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    _write("/proc/self/setgroups", "deny")  # the kernel requires it before an unprivileged gid_map
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _loopback_up()


def isolation_refusal() -> str | None:
    """None if this machine lets `local` make its private network namespace, else the kernel's reason.

    Tried in a forked child that exits at once, so this process stays where it is.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one thread, as unshare of a user namespace requires
        os.close(read_end)
        try:
            enter_private_network()
            message = b""
        except OSError as error:
            message = (error.strerror or str(error) or "refused").encode()
        except BaseException as error:  # noqa: BLE001 - anything else is a refusal too, reported by its name
            message = f"{type(error).__name__}: {error}".encode()
        os.write(write_end, message)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return message or None


def network_namespace(pid: int) -> str | None:
    """The network namespace of process `pid` (`net:[inode]`), or None if it cannot be read (gone, not Linux)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def exposure_warning(port: int, reason: str) -> str:
    """The line `local` prints when its roles run on the host's network: what is exposed, to whom, the fix."""
    return (f"dqn-service local: WARNING: the roles run on this host's network ({reason}): the replay server's "
            f"Reverb port {port} listens on every interface, and any host that reaches this one can read and "
            f"rewrite the replay buffer and the published weights. Block port {port} in a firewall, or run where "
            "the kernel allows user or network namespaces (docs/trust.md).")
