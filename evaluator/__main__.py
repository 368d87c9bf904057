"""`python -m evaluator` = `dqn-service evaluator`."""

import sys

from launcher.cli import entry

entry(["evaluator", *sys.argv[1:]])
