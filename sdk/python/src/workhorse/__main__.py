"""``python -m workhorse schema migrate|status`` and ``python -m workhorse worker module:attribute`` (see ``workhorse._cli``)."""

import sys

from ._cli import main

sys.exit(main())
