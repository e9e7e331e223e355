"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .agent_hooks import AgentPlugins as AgentPlugins
from .agent_hooks import PluginAgentHooks as PluginAgentHooks
from .core import Framework as Framework
from .envcache import DEFAULT_ENVIRONMENT_CACHE_SIZE as DEFAULT_ENVIRONMENT_CACHE_SIZE
from .envcache import DEFAULT_ENVIRONMENT_IDLE_SECONDS as DEFAULT_ENVIRONMENT_IDLE_SECONDS
from .envcache import EnvironmentCache as EnvironmentCache
from .loading import BUILTIN_NAME as BUILTIN_NAME
from .loading import DISABLE_ENV as DISABLE_ENV
from .loading import STRICT_ENV as STRICT_ENV
from .loading import PluginGroup as PluginGroup
from .loading import PluginLoadError as PluginLoadError
from .loading import PluginStatus as PluginStatus
from .model_stage import RUN_MODEL as RUN_MODEL
from .model_stage import RUN_MODEL_STREAM as RUN_MODEL_STREAM
from .model_stage import HookRuntime as HookRuntime
from .pipeline import TurnHost as TurnHost
from .pipeline import TurnPipeline as TurnPipeline
