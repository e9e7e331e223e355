"""Values crossing between Bub plugins and hookline, recognised by Bub's own classes.

Each function takes what one side hands over and returns what the other side expects,
with the same meaning: a Bub ``ToolCallDecision.deny`` is a hookline deny, a Bub
``Tool`` is a hookline ``Tool`` running the same handler, a hookline outbound is a Bub
``ChannelMessage``. Anything that is not a Bub value passes through unchanged, so a Bub
plugin that already answers with hookline's types keeps working.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from hookline.kernel.channels import ADMIT_ACTIONS, AdmitDecision, TurnSnapshot
from hookline.kernel.envelope import PROMPT_MEDIA_TYPES, MediaItem, envelope_content, get_field
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.interception import LLMCallDecision, LLMCallRequest, ToolCallDecision
from hookline.kernel.models import ModelChoice, ModelOptions
from hookline.kernel.tools import Tool, ToolContext

logger = logging.getLogger(__name__)

# -- interception ------------------------------------------------------------------------


def tool_decision(value: Any) -> Any:
    """A Bub ``ToolCallDecision`` as hookline's, with the meaning Bub's executor gives it:
    ``deny`` and ``replace`` by name, anything else proceeds. Never raises, so a deny can
    never turn into a crash that the isolated hook would swallow (failing open)."""
    from bub.core.events import ToolCallDecision as BubToolCallDecision

    if not isinstance(value, BubToolCallDecision):
        return value
    if value.action == "deny":
        return ToolCallDecision("deny", message=str(value.message or ""))
    if value.action == "replace":
        return ToolCallDecision("replace", result=value.result)
    arguments = value.arguments
    return ToolCallDecision("proceed", arguments=dict(arguments) if isinstance(
        arguments, Mapping) else arguments)


def llm_answer(value: Any) -> Any:
    """A Bub ``LLMCallDecision`` or ``LLMCallRequest`` as hookline's."""
    from bub.core.events import LLMCallDecision as BubLLMCallDecision
    from bub.core.events import LLMCallRequest as BubLLMCallRequest

    if isinstance(value, BubLLMCallDecision):
        return LLMCallDecision("finish", str(value.text or ""))
    if isinstance(value, BubLLMCallRequest):
        return LLMCallRequest(run_id=value.run_id, model=value.model,
                              messages=list(value.messages),
                              tool_names=tuple(value.tool_names), max_tokens=value.max_tokens)
    return value


# -- admission ---------------------------------------------------------------------------


def admit_decision(value: Any) -> Any:
    """A Bub ``AdmitDecision`` as hookline's (an unknown action is processed, as Bub's
    channel manager does, with a warning)."""
    from bub.channels.admission import AdmitDecision as BubAdmitDecision

    if not isinstance(value, BubAdmitDecision):
        return value
    if value.action not in ADMIT_ACTIONS:
        logger.warning("bub.admit_unknown_action action=%r; processing the message",
                       value.action)
        return AdmitDecision("process", value.reason)
    return AdmitDecision(value.action, value.reason)


def bub_admit_decision(value: AdmitDecision | None) -> Any:
    """hookline's decision as Bub's, for a Bub plugin that asks the framework."""
    from bub.channels.admission import AdmitDecision as BubAdmitDecision

    return None if value is None else BubAdmitDecision(value.action, value.reason)


def bub_snapshot(turn: TurnSnapshot) -> Any:
    """hookline's ``TurnSnapshot`` as Bub's (the same fields)."""
    from bub.channels.admission import TurnSnapshot as BubTurnSnapshot

    return BubTurnSnapshot(session_id=turn.session_id, is_running=bool(turn.is_running),
                           running_count=turn.running_count,
                           pending_count=turn.pending_count,
                           steering_count=turn.steering_count)


# -- model options -----------------------------------------------------------------------


def model_options(value: Any) -> Any:
    """Bub's ``ModelOptions`` as hookline's (the same fields)."""
    from bub.model_selection import ModelOptions as BubModelOptions

    if not isinstance(value, BubModelOptions):
        return value
    return ModelOptions([ModelChoice(c.id, c.name, c.description, c.meta) for c in value.models],
                        current_model=value.current_model)


def bub_model_options(value: ModelOptions) -> Any:
    """hookline's ``ModelOptions`` as Bub's."""
    from bub.model_selection import ModelChoice as BubModelChoice
    from bub.model_selection import ModelOptions as BubModelOptions

    return BubModelOptions([BubModelChoice(c.id, c.name, c.description, c.meta)
                            for c in value.models], current_model=value.current_model)


# -- messages and media ------------------------------------------------------------------


def bub_message(message: Any, channel: str) -> Any:
    """An outbound envelope as the Bub ``ChannelMessage`` Bub's channel manager sends to
    channel ``channel``: a Bub message as is, anything else rebuilt field by field."""
    from bub.channels.message import ChannelMessage as BubChannelMessage

    if isinstance(message, BubChannelMessage):
        return message
    context = get_field(message, "context")
    return BubChannelMessage(
        session_id=str(get_field(message, "session_id") or f"{channel}:default"),
        channel=channel,
        chat_id=str(get_field(message, "chat_id") or "default"),
        content=envelope_content(message),
        context=dict(context) if isinstance(context, Mapping) else {},
        kind=get_field(message, "kind") or "normal",
    )


async def resolve_media(message: Any) -> int:
    """Replace the Bub ``MediaItem`` attachments of an inbound message by hookline media
    items with a URL, fetching data through ``data_fetcher`` as Bub's builtin does when it
    builds the prompt; returns how many were resolved. Kinds Bub does not put into the
    prompt (documents) stay as they are."""
    from bub.channels.message import MediaItem as BubMediaItem

    media = get_field(message, "media")
    if not media or not any(isinstance(item, BubMediaItem) for item in media):
        return 0
    resolved: list[Any] = []
    count = 0
    for item in media:
        if not isinstance(item, BubMediaItem) or item.type not in PROMPT_MEDIA_TYPES:
            resolved.append(item)
            continue
        try:
            url = await item.get_url()
        except Exception as exc:  # one broken attachment must not fail the turn
            logger.warning("bub.media_fetch_failed kind=%s file=%s error=%s: %s", item.type,
                           item.filename, type(exc).__name__, exc)
            continue
        if not url:
            continue
        resolved.append(MediaItem(item.type, item.mime_type, item.filename, url=url))
        count += 1
    try:
        if isinstance(message, dict):
            message["media"] = resolved
        else:
            message.media = resolved
    except (AttributeError, TypeError):
        logger.warning("bub.media_unresolved reason=the envelope refuses a new media list")
        return 0
    return count


# -- tools -------------------------------------------------------------------------------


def hookline_error(exc: BaseException, tool: str) -> HooklineError:
    """A Bub tool failure as the error Bub's executor reports: ``BubError`` keeps its
    kind, a pydantic ``ValidationError`` is ``invalid_input``, anything else ``tool``."""
    from bub.errors import BubError

    if isinstance(exc, HooklineError):
        return exc
    if isinstance(exc, BubError):
        return HooklineError(ErrorKind(str(exc.kind.value)), exc.message, exc.details)
    try:
        from pydantic import ValidationError
    except ImportError:  # pragma: no cover - Bub depends on pydantic
        ValidationError = ()  # type: ignore[assignment,misc]
    if isinstance(exc, ValidationError):
        return HooklineError(ErrorKind.invalid_input,
                             f"Tool '{tool}' argument validation failed: {exc}")
    return HooklineError(ErrorKind.tool, f"Tool '{tool}' execution failed: "
                                         f"{type(exc).__name__}: {exc}")


def bub_tool_context(context: ToolContext | None) -> Any:
    """hookline's ``ToolContext`` as Bub's (``bub.core.tools.ToolContext``): the same
    run id, the same (shared) state dict, the run's tape and event bus."""
    from bub.core.tools import ToolContext as BubToolContext

    if context is None:
        context = ToolContext()
    if isinstance(context, BubToolContext):
        return context
    return BubToolContext(tape=context.tape, run_id=context.run_id or None,
                          state=context.state, code_mode=context.code_mode,
                          command=context.command, events=context.events)


def hookline_tool(tool: Any) -> Tool:
    """A Bub ``Tool`` as a hookline ``Tool``: same name, schema, exposure, renderer and
    handler (a context tool gets a Bub ``ToolContext``)."""
    bub_tool = tool

    async def handler(**arguments: Any) -> Any:
        try:
            if bub_tool.context:
                context = bub_tool_context(arguments.pop("context", None))
                return await bub_tool.run(context=context, **arguments)
            return await bub_tool.run(**arguments)
        except Exception as exc:
            raise hookline_error(exc, bub_tool.name) from exc

    parameters = bub_tool.parameters or {"type": "object", "properties": {}}
    return Tool(name=bub_tool.name, handler=handler, description=bub_tool.description or "",
                parameters=dict(parameters), context=bool(bub_tool.context),
                exposure=bub_tool.exposure, renderer=bub_tool.render,
                output_schema=bub_tool.output_schema, deferred=bool(bub_tool.deferred))
