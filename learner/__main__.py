"""`python -m learner` = `dqn-service learner`."""

import sys

from launcher.cli import entry

entry(["learner", *sys.argv[1:]])
