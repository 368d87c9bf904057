"""`python -m replay_server` = `dqn-service replay-server`."""

import sys

from launcher.cli import main

sys.exit(main(["replay-server", *sys.argv[1:]]))
