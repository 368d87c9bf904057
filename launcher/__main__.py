"""`python -m launcher` = `dqn-service`."""

from launcher.cli import entry

entry()
