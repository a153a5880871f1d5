"""``python -m crosscurv`` is the ``crosscurv`` command."""

import sys

from crosscurv.experiments.cli import main

sys.exit(main())
