"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .files import HOME_ENV as HOME_ENV
from .files import PRIVATE_DIR_MODE as PRIVATE_DIR_MODE
from .files import PRIVATE_FILE_MODE as PRIVATE_FILE_MODE
from .files import create_private_file as create_private_file
from .files import make_private_dir as make_private_dir
from .files import process_umask as process_umask
from .files import replacing_private_file as replacing_private_file
from .files import secure_home as secure_home
from .files import secure_store as secure_store
from .files import shared_secret_problem as shared_secret_problem
from .files import tighten as tighten
from .files import write_private_file as write_private_file
from .redact import redact_command_line as redact_command_line
from .redact import redact_credentials as redact_credentials
from .redact import redact_paths as redact_paths
from .redact import replace_values as replace_values
from .redact import url_secrets as url_secrets
