"""Helpers shared by the tests that drive the conformance suite in ``spec/``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC_DIR = ROOT / "spec"
KERNEL_DIR = ROOT / "kernel"
DISPATCH_DIR = KERNEL_DIR / "_dispatch"
