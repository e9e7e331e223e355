"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .background import BackgroundInfo as BackgroundInfo
from .background import BackgroundProcesses as BackgroundProcesses
from .commands import CommandResult as CommandResult
from .commands import run_command as run_command
from .environment import LocalEnvironment as LocalEnvironment
from .files import FileTooLarge as FileTooLarge
from .files import LineSlice as LineSlice
from .files import ReadBudget as ReadBudget
from .files import file_start as file_start
from .files import is_inside as is_inside
from .files import open_regular_file as open_regular_file
from .files import open_single_link as open_single_link
from .files import read_file as read_file
from .files import read_file_lines as read_file_lines
from .files import read_line_slice as read_line_slice
from .files import write_file as write_file
from .instructions import AGENTS_FILE as AGENTS_FILE
from .instructions import MAX_AGENTS_BYTES as MAX_AGENTS_BYTES
from .instructions import MAX_AGENTS_TOTAL as MAX_AGENTS_TOTAL
from .instructions import WorkspaceInstructions as WorkspaceInstructions
from .instructions import agents_places as agents_places
from .instructions import read_agents_files as read_agents_files
from .processes import KILL_WAIT as KILL_WAIT
from .processes import POSIX as POSIX
from .processes import STOP_GRACE as STOP_GRACE
from .processes import LocalProcess as LocalProcess
from .processes import open_local_process as open_local_process
from .processes import stop_processes as stop_processes
from .protection import MadeWatch as MadeWatch
from .protection import in_repository as in_repository
from .protection import protected_paths as protected_paths
from .protection import to_protect as to_protect
from .protection import watch_for as watch_for
from .records import OWNER_ENV as OWNER_ENV
from .records import ProcessRecord as ProcessRecord
from .records import end_leftovers as end_leftovers
from .records import open_record as open_record
from .sandbox import Confinement as Confinement
from .sandbox import SandboxPolicy as SandboxPolicy
from .sandbox import check_exposure as check_exposure
from .sandbox import private_temp_root as private_temp_root
from .toolenv import DEFAULT_DROP as DEFAULT_DROP
from .toolenv import EnvironmentPolicy as EnvironmentPolicy
from .tools import MAX_OUTPUT as MAX_OUTPUT
from .tools import MAX_READ_CHARS as MAX_READ_CHARS
from .tools import builtin_tools as builtin_tools
