"""Imported only in `local`'s forkserver (first in launcher/roles.py's STACK_IMPORTS), for its side effect.

SIGTERM sent to the launcher's process group (`kill -TERM -PGID`, a supervisor stopping the job) also reaches the
forkserver, which shares that group. Killed, it could no longer report the roles' exit codes, and the launcher,
seeing every role "exited", would leave them running instead of stopping them in order. Ignoring SIGTERM here
keeps it alive until the launcher is done; it still exits as soon as the launcher does (multiprocessing closes
its pipe). Each forked role restores the default before it starts (launcher/forked.py).
"""

import signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)
