"""The pytest11 entry module: fixtures for plugin authors, imported lazily.

Importing this module costs nothing: it imports pytest only, and each fixture imports
hookline's framework and builtins when a test asks for it.
"""

from __future__ import annotations
