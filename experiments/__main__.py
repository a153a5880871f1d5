"""``python -m crosscurv`` is ``crosscurv``."""

import sys

from .cli import main

sys.exit(main())
