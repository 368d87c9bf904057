"""`python -m actor` = `dqn-service actor`."""

import sys

from launcher.cli import entry

entry(["actor", *sys.argv[1:]])
