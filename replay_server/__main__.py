"""`python -m replay_server` = `dqn-service replay-server`."""

import sys

from launcher.cli import entry

entry(["replay-server", *sys.argv[1:]])
