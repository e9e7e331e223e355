"""A plugin installed for a hookline process started by a test, as pip would leave it: its
module and a dist-info folder whose `hookline` entry points name it, in a folder to put on
PYTHONPATH (the real `importlib.metadata` finds it there)."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["install_plugin"]


def install_plugin(site: Path, module: str, source: str, *entry_points: str) -> Path:
    """`source` (dedented) as `site/<module>.py`, and the distribution `<module>` 0.1 with
    `entry_points` (`name = module:Attribute` lines); returns `site`."""
    dist = site / f"{module}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[hookline]\n" + "".join(f"{line}\n" for line in entry_points))
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    return site
