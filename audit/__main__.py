"""``python -m audit ...`` or ``spark-submit audit/__main__.py ...``."""

import sys
from pathlib import Path

if not __package__:
    # Run as a file (spark-submit): make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
