"""`python -m learner` = `dqn-service learner`."""

import sys

from launcher.cli import main

sys.exit(main(["learner", *sys.argv[1:]]))
