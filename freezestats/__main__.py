"""``python -m freezestats``: the command line."""

import sys

from freezestats.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
