"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .attachments import IMAGE_TYPES as IMAGE_TYPES
from .attachments import attached_text as attached_text
from .attachments import prompt_media as prompt_media
from .cli.channel import CliChannel as CliChannel
from .cli.input import ChatCommand as ChatCommand
from .debounce import DebounceBuffer as DebounceBuffer
from .debounce import merge_messages as merge_messages
from .http.channel import HttpChannel as HttpChannel
from .manager import DEFAULT_SHUTDOWN_TIMEOUT as DEFAULT_SHUTDOWN_TIMEOUT
from .manager import ChannelManager as ChannelManager
from .protocols import ChatChannel as ChatChannel
from .protocols import ListenerChannel as ListenerChannel
