"""`python -m actor` = `dqn-service actor`."""

import sys

from launcher.cli import main

sys.exit(main(["actor", *sys.argv[1:]]))
