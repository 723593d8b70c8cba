"""``python -m pda``: the same command line as the ``pda`` script (see :mod:`pda.cli`)."""

import sys

from pda.cli import main

sys.exit(main())
