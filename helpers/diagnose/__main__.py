"""`python -m helpers.diagnose diagnose MODEL`: the same as the console script `tokuni`."""

import sys

from .cli import main

sys.exit(main())
