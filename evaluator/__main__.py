"""`python -m evaluator` = `dqn-service evaluator`."""

import sys

from launcher.cli import main

sys.exit(main(["evaluator", *sys.argv[1:]]))
