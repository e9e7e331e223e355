"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .base import USAGE_FIELDS as USAGE_FIELDS
from .base import ContentItem as ContentItem
from .base import Finished as Finished
from .base import ModelClient as ModelClient
from .base import ModelEvent as ModelEvent
from .base import ModelMessage as ModelMessage
from .base import Role as Role
from .base import TextDelta as TextDelta
from .base import ToolCallEvent as ToolCallEvent
from .base import ToolCallSpec as ToolCallSpec
from .base import ToolSchema as ToolSchema
from .base import Usage as Usage
from .base import usage_dict as usage_dict
from .offline import OfflineModel as OfflineModel
from .opening import ModelOpener as ModelOpener
from .opening import open_model as open_model
from .options import MODEL_OPTIONS as MODEL_OPTIONS
from .options import MODEL_OPTIONS_STATE as MODEL_OPTIONS_STATE
from .options import checked_model_options as checked_model_options
from .options import parse_model_options as parse_model_options
from .pairing import OpenCalls as OpenCalls
from .republic_client import NEEDS_API_BASE as NEEDS_API_BASE
from .republic_client import RepublicModel as RepublicModel
from .republic_client import env_prefix as env_prefix
from .republic_client import known_providers as known_providers
from .republic_client import to_republic_messages as to_republic_messages
from .republic_client import to_republic_tools as to_republic_tools
from .scripted import ScriptedCall as ScriptedCall
from .scripted import ScriptedModel as ScriptedModel
from .scripted import ScriptedTurn as ScriptedTurn
from .scripted import load_turns as load_turns
from .scripted import parse_turns as parse_turns
