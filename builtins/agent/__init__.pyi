"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .loop import Agent as Agent
from .loop import AgentConfig as AgentConfig
from .steering import DEFAULT_KEY as DEFAULT_KEY
from .steering import InMemorySteeringInbox as InMemorySteeringInbox
from .steering import scope_inbox as scope_inbox
from .steering import steer as steer
from .steering import steered_messages as steered_messages
from .steering import steering_key as steering_key
from .usage import COMPACT_EVENT as COMPACT_EVENT
from .usage import add_usage as add_usage
from .usage import cache_writes as cache_writes
from .usage import reported_cost as reported_cost
from .usage import token_counts as token_counts
