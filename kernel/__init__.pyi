"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from ._dispatch import DispatchTrace as DispatchTrace
from ._dispatch import HookBinding as HookBinding  # deprecated here (warns)
from ._dispatch import HookImpl as HookImpl
from ._dispatch import HookimplOpts as HookimplOpts
from ._dispatch import HookReport as HookReport
from ._dispatch import HookSpec as HookSpec
from ._dispatch import HookspecOpts as HookspecOpts
from ._dispatch import ImplInfo as ImplInfo  # deprecated here (warns)
from ._dispatch import PluginCheck as PluginCheck
from ._dispatch import PluginProblem as PluginProblem
from ._dispatch import PluginValidationError as PluginValidationError
from ._dispatch import Registry as Registry
from ._dispatch import TraceRecord as TraceRecord
from ._dispatch import UnknownImpl as UnknownImpl  # deprecated here (warns)
from ._identity import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._identity import __version__ as __version__
from .channels import AdmitAction as AdmitAction
from .channels import AdmitDecision as AdmitDecision
from .channels import AdmitOutcome as AdmitOutcome
from .channels import ApprovalRouter as ApprovalRouter
from .channels import Channel as Channel
from .channels import ChannelRouter as ChannelRouter
from .channels import Interface as Interface
from .channels import Lifecycle as Lifecycle
from .channels import MessageHandler as MessageHandler
from .channels import SteeringInbox as SteeringInbox
from .channels import StopEvent as StopEvent
from .channels import TurnSnapshot as TurnSnapshot
from .envelope import ChannelMessage as ChannelMessage
from .envelope import Envelope as Envelope
from .envelope import MediaItem as MediaItem
from .envelope import MediaType as MediaType
from .environment import ByteReader as ByteReader
from .environment import CodeFailed as CodeFailed
from .environment import Environment as Environment
from .environment import Process as Process
from .environment import StrPath as StrPath
from .errors import ErrorKind as ErrorKind
from .errors import HooklineError as HooklineError
from .events import AgentEvent as AgentEvent
from .events import ChatFinished as ChatFinished
from .events import CommandFinished as CommandFinished
from .events import EventBus as EventBus
from .events import EventHandler as EventHandler
from .events import RunFinished as RunFinished
from .events import RunStarted as RunStarted
from .events import StepFinished as StepFinished
from .events import StepStarted as StepStarted
from .events import TapeEvent as TapeEvent
from .events import ToolCallFinished as ToolCallFinished
from .events import ToolCallStarted as ToolCallStarted
from .framework.agent_hooks import AgentPlugins as AgentPlugins
from .framework.agent_hooks import PluginAgentHooks as PluginAgentHooks  # deprecated here (warns)
from .framework.core import Framework as Framework
from .framework.envcache import EnvironmentCache as EnvironmentCache  # deprecated here (warns)
from .framework.loading import PluginLoadError as PluginLoadError
from .framework.loading import PluginStatus as PluginStatus
from .framework.model_stage import HookRuntime as HookRuntime
from .hooks import HOOK_SPECS as HOOK_SPECS
from .hooks import HooklineSpecs as HooklineSpecs
from .hooks import hookimpl as hookimpl
from .hooks import hookspec as hookspec
from .interception import LLMCallDecision as LLMCallDecision
from .interception import LLMCallRequest as LLMCallRequest
from .interception import LLMCallResult as LLMCallResult
from .interception import ToolCall as ToolCall
from .interception import ToolCallAction as ToolCallAction
from .interception import ToolCallDecision as ToolCallDecision
from .interception import ToolCallResult as ToolCallResult
from .messages import ContentItem as ContentItem
from .messages import ModelMessage as ModelMessage
from .messages import Role as Role
from .messages import ToolCallSpec as ToolCallSpec
from .models import ModelChoice as ModelChoice
from .models import ModelOptions as ModelOptions
from .prompt import LegacyPrompt as LegacyPrompt
from .prompt import MediaContent as MediaContent
from .prompt import UserContent as UserContent
from .streaming import AsyncStreamEvents as AsyncStreamEvents
from .streaming import StreamEvent as StreamEvent
from .streaming import StreamState as StreamState
from .streaming import TextAnswerStream as TextAnswerStream
from .tape import AsyncBatchTapeStore as AsyncBatchTapeStore
from .tape import AsyncTapeStore as AsyncTapeStore
from .tape import BatchTapeStore as BatchTapeStore
from .tape import TapeContext as TapeContext
from .tape import TapeEntry as TapeEntry
from .tape import TapeQuery as TapeQuery
from .tape import TapeSidecar as TapeSidecar
from .tape import TapeStore as TapeStore
from .tools import EventEmitter as EventEmitter
from .tools import Tool as Tool
from .tools import ToolContext as ToolContext
from .tools import ToolExposure as ToolExposure
from .turn import TurnResult as TurnResult
from .turn import TurnState as TurnState
from .typed import *  # noqa: F403  (every name of its __all__)
