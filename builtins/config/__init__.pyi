"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .file import MAX_CONFIG_BYTES as MAX_CONFIG_BYTES
from .file import config_lock as config_lock
from .file import default_home as default_home
from .file import merge_config as merge_config
from .file import parse_toml as parse_toml
from .file import read_config_file as read_config_file
from .file import update_config as update_config
from .file import write_config as write_config
from .limits import CONTEXT_WINDOW as CONTEXT_WINDOW
from .limits import MAX_EDIT_BYTES as MAX_EDIT_BYTES
from .limits import MAX_REQUEST_TOOLS as MAX_REQUEST_TOOLS
from .limits import MAX_SESSION_ID_LENGTH as MAX_SESSION_ID_LENGTH
from .limits import SESSION_FIELDS as SESSION_FIELDS
from .limits import check_session_fields as check_session_fields
from .limits import session_id_problem as session_id_problem
from .load import load_settings as load_settings
from .load import parse_setting as parse_setting
from .load import settings_from_config as settings_from_config
from .parsers import API_FORMATS as API_FORMATS
from .parsers import APPROVAL_POLICIES as APPROVAL_POLICIES
from .parsers import MIN_HTTP_TOKEN_LENGTH as MIN_HTTP_TOKEN_LENGTH
from .parsers import SANDBOX_MODES as SANDBOX_MODES
from .parsers import TOOL_ENV_MODES as TOOL_ENV_MODES
from .parsers import ModelPrice as ModelPrice
from .table import DEFAULT_DENY_READ as DEFAULT_DENY_READ
from .table import DEFAULT_HTTP_BODY_TIMEOUT as DEFAULT_HTTP_BODY_TIMEOUT
from .table import DEFAULT_HTTP_HOST as DEFAULT_HTTP_HOST
from .table import DEFAULT_HTTP_PORT as DEFAULT_HTTP_PORT
from .table import DEFAULT_HTTP_TIMEOUT as DEFAULT_HTTP_TIMEOUT
from .table import DEFAULT_MAX_FILE_BYTES as DEFAULT_MAX_FILE_BYTES
from .table import DEFAULT_MAX_PROCESSES as DEFAULT_MAX_PROCESSES
from .table import DEFAULT_MAX_STEPS as DEFAULT_MAX_STEPS
from .table import DEFAULT_PROTECT as DEFAULT_PROTECT
from .table import Settings as Settings
from .table import SettingsError as SettingsError
from .table import misplaced_settings as misplaced_settings
from .table import setting_env as setting_env
from .toml import dumps_toml as dumps_toml
from .toml import rewritten as rewritten
