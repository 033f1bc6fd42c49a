"""``python -m kvlab`` runs the ``kvlab`` command."""

import sys

from kvlab.cli.main import main

sys.exit(main())
