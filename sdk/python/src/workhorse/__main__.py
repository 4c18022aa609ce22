"""``python -m workhorse schema migrate|status`` (see ``workhorse._cli``)."""

import sys

from ._cli import main

sys.exit(main())
