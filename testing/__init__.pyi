"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .framework import FrameworkFactory as FrameworkFactory
from .framework import Script as Script
from .framework import build_framework as build_framework
from .framework import builtin_plugin as builtin_plugin
from .framework import scripted_model as scripted_model
from .framework import write_script as write_script
from .trace import ErrorCapture as ErrorCapture
from .trace import ErrorReport as ErrorReport
from .trace import HookTrace as HookTrace
from .trace import capture_errors as capture_errors
from .trace import trace_hooks as trace_hooks
from .turns import Turn as Turn
from .turns import run_turn as run_turn
from .turns import run_turn_sync as run_turn_sync
