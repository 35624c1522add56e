"""``python -m broker server.properties``: run one node in the foreground."""

import sys

from .app import main

sys.exit(main())
