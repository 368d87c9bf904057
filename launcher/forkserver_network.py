"""Imported only in `local`'s forkserver, before the ML stack, when the run isolates its network (for its effect).

The forkserver then lives in a network namespace of its own (launcher/network.py), and so does every role forked
from it. It runs here, in a fresh interpreter that has started no thread yet, because the kernel grants a new user
namespace only to a process with one thread. An error here stops the forkserver, so no role starts: roles
started on the host's network instead would expose the replay port while `local` believes them isolated.
"""

from launcher.network import enter_private_network

enter_private_network()
