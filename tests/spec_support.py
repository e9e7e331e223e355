"""Helpers shared by the tests that drive the conformance suite in ``spec/``."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC_DIR = ROOT / "spec"
KERNEL_DIR = ROOT / "kernel"
DISPATCH_DIR = KERNEL_DIR / "_dispatch"

if str(SPEC_DIR) not in sys.path:
    sys.path.insert(0, str(SPEC_DIR))
