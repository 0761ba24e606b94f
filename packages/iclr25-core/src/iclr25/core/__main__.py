"""``python -m iclr25.core`` is the ``iclr25`` command."""

import sys

from .cli import main

sys.exit(main())
