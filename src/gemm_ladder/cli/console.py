"""The commands' rich console (one place, so every command module can make one)."""
from __future__ import annotations

import os
import sys


def make_console():
    from rich.console import Console
    # When output is captured (CI, device runs) rich would assume 80 columns; honour COLUMNS.
    return Console(width=None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", 120)))
