"""`python -m pipeline.cli`: the same as the `turbotfx` command."""

import sys

from pipeline.cli.main import main

sys.exit(main())
