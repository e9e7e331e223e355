"""``python -m hookline.spec``: the conformance runner of the installed suite."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite  # found through the line above, as the runner finds its modules

raise SystemExit(suite.main(prog="python -m hookline.spec"))
