import sys

from freezestats.cli import main

sys.exit(main())
