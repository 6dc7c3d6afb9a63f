import sys

from poolrag.cli import main

sys.exit(main())
