"""`python -m launcher` = `dqn-service`."""

import sys

from launcher.cli import main

sys.exit(main())
