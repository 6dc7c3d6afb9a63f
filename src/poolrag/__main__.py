"""``python -m poolrag``: the ``poolrag`` command, for an environment whose scripts folder is not on
``PATH`` (as ``python -m pip``)."""

import sys

from poolrag.cli import main

sys.exit(main())
