"""`python -m debate.cli`: the `debate` command."""

import sys

from debate.cli import main

sys.exit(main())
