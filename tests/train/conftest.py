"""Make the helper module ``train_fixtures`` importable whatever pytest's import mode."""

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
