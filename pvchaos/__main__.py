"""`python -m pvchaos` is the `pvchaos` command."""

import sys

from pvchaos.cli import main

sys.exit(main())
