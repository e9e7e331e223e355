"""Real providers through republic `provider:model` specs.

`RepublicModel("openai:gpt-4o-mini", api_key=..., api_base=..., api_format=...)` streams
through republic 0.6 and reports hookline events and errors only:

- `openai-compatible:<model>` works out of the box (republic 0.6 does not register that
  provider; it is registered here on first use); give it `api_base`.
- Keys and endpoints: the arguments (from HOOKLINE_API_KEY / HOOKLINE_API_BASE or the
  config file; `open_model` reads the variable `api_key_env` names when no key is set),
  else republic's `REPUBLIC_<PROVIDER>_API_KEY` / `_API_BASE` variables.
- Every failure is a `HooklineError` whose message names the provider, the model and what
  to set (failures.py describes republic's): kind `config` for what configuration fixes
  (unknown provider, bad spec or api format, rejected or missing key, unknown model or
  endpoint), kind `provider` for what the service did (rate limit, server error, refused
  request, connection failure, broken stream). The original republic exception is the
  `__cause__`.
- Each `stream()` call uses its own HTTP client, closed when the stream ends or is closed
  early, so a client can be used from any event loop; retries (HTTP 408/409/429/5xx and
  dropped connections, before any event was produced) are done here with `anyio.sleep`,
  so the client runs on asyncio and trio alike.
- A provider that caches a prompt only up to a breakpoint is asked to cache each request
  (`CACHE_BREAKPOINTS`), unless its endpoint refuses that field (said once, then left
  out).

republic is imported lazily: importing this module stays cheap.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import AsyncExitStack, aclosing
from typing import TYPE_CHECKING, Any

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.messages import ToolCallSpec, as_model_message
from hookline.kernel.prompt import to_content

from ..config import setting_env
from ..privacy.redact import redact_credentials
from ..store.entries import valid_text, valid_values
from .base import (
    USAGE_FIELDS,
    Finished,
    ModelEvent,
    Retrying,
    TextDelta,
    ToolCallEvent,
    ToolSchema,
    Usage,
    usage_dict,
)
from .failures import DEFAULT_ENDPOINT, Subject, describe_failure
from .pairing import OpenCalls
from .retries import reason, retry_after, retryable

if TYPE_CHECKING:
    import republic

__all__ = [
    "NEEDS_API_BASE",
    "RepublicModel",
    "env_prefix",
    "known_providers",
    "to_republic_messages",
    "to_republic_tools",
]

logger = logging.getLogger(__name__)

NEEDS_API_BASE = frozenset({"openai-compatible"})
"""Providers with no endpoint of their own: without `api_base` they are refused."""

CACHE_BREAKPOINTS: dict[str, dict[str, Any]] = {
    "anthropic": {"cache_control": {"type": "ephemeral"}}}
"""What each provider that caches prompts only up to a breakpoint is sent, in every
request's body, for its cache to hit. Anthropic puts a top-level `cache_control` at the
end of the request, which the next request repeats (between two compactions it is this
one plus what was added), and reads the cache back at a tenth of the input price. Others
(OpenAI, DeepSeek, Gemini) cache on their own."""


def _ensure_providers() -> None:
    """Register the providers hookline's specs rely on (idempotent)."""
    import republic

    if "openai-compatible" not in republic.all_providers():
        republic.register_provider(republic.providers.OpenAICompatible)


def env_prefix(provider: str) -> str:
    """The prefix of republic's own variables for `provider` (`REPUBLIC_OPENAI_COMPATIBLE`
    then `_API_KEY` / `_API_BASE`)."""
    return f"REPUBLIC_{provider.upper().replace('-', '_')}"


def known_providers() -> list[str]:
    """Provider names a `provider:model` spec can use: republic's, openai-compatible too."""
    import republic

    _ensure_providers()
    return sorted(republic.all_providers())


# Conversion to republic ------------------------------------------------------------------


def _parts(content: Any) -> tuple[Any, ...]:
    from republic import Text

    if isinstance(content, str):
        return (Text(content),) if content else ()
    parts: list[Any] = []
    for item in to_content(list(content)):
        if isinstance(item, str):
            if item:
                parts.append(Text(item))
        else:
            parts.append(item)
    return tuple(parts)


def to_republic_messages(messages: Sequence[Any]) -> list[republic.Message]:
    """republic Messages for ModelMessages (republic Messages pass through unchanged).

    A tool message answers the call with its id announced by an earlier assistant
    message, paired by position as well (`pairing`), so ids repeated across responses
    or within one do not mix calls up; without one, republic announces it itself.
    """
    from republic import Message, ToolCall, system

    calls: OpenCalls[ToolCall] = OpenCalls()
    converted: list[Message] = []
    for index, raw in enumerate(messages):
        if isinstance(raw, Message):
            for call in raw.tool_calls:
                calls.add(index, call.id, call)
            if raw.tool_call is not None:
                calls.answer(raw.tool_call.id)
            converted.append(raw)
            continue
        message = as_model_message(raw)
        if message.role == "system":
            converted.append(system(message.text))
        elif message.role == "user":
            converted.append(Message("user", _parts(message.content)))
        elif message.role == "assistant":
            tool_calls = tuple(
                ToolCall(call.id, call.name, call.arguments or "{}", metadata=dict(call.metadata))
                for call in message.tool_calls
            )
            for call in tool_calls:
                calls.add(index, call.id, call)
            converted.append(Message("assistant", _parts(message.content), tool_calls=tool_calls))
        else:
            call_id = str(message.tool_call_id)
            answered = calls.answer(call_id) or ToolCall(call_id, message.name or "", "{}")
            converted.append(
                Message(
                    "tool",
                    _parts(message.content),
                    tool_call=answered,
                    is_error=message.is_error,
                )
            )
    return converted


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A JSON escape of half a UTF-16 pair: a pair is an emoji, a lone one no character."""


def valid_arguments(arguments: str) -> str:
    """A tool call's JSON arguments with each lone surrogate (`"\\udcff"`, valid JSON)
    replaced by U+FFFD, as in the reply's text: the tool, the tape and the terminal get
    characters. Text without such an escape is returned as it came, byte for byte."""
    if _SURROGATE_ESCAPE.search(arguments) is None:
        return arguments
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments  # the tool call's own check says what is wrong with it
    cleaned = valid_values(parsed)
    return arguments if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)


def to_republic_tools(tools: Sequence[ToolSchema]) -> list[republic.Tool]:
    from republic import Tool

    return [Tool(tool.name, tool.description or "", dict(tool.parameters)) for tool in tools]


# The client ----------------------------------------------------------------------------


class RepublicModel:
    """A ModelClient over a republic provider (see the module docstring).

    `options` are republic provider options (`headers`, `extra_body`, `timeout`,
    `env_prefix`, `http_client`, `auth`, ...); retries are governed by `max_retries`,
    `retry_delay` and `max_retry_delay` (seconds, exponential backoff with jitter,
    `Retry-After` honoured).
    """

    def __init__(
        self,
        spec: str,
        *,
        api_key: str | None = None,
        api_base: str | None = None,
        api_format: str | None = None,
        max_retries: int = 2,
        retry_delay: float = 0.5,
        max_retry_delay: float = 30.0,
        **options: Any,
    ) -> None:
        provider, separator, model = spec.partition(":")
        if not separator or not provider.strip() or not model.strip():
            raise HooklineError(
                ErrorKind.config,
                f"Model spec {spec!r} is not 'provider:model'. Set {setting_env('model')} (or "
                "model in the config file) to a spec such as openai:gpt-4o-mini, "
                f"openai-compatible:<model> with {setting_env('api_base')}, or offline.",
                details={"spec": spec},
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError("max_retries must be a non-negative integer")
        self.name = spec
        self.provider = provider
        self.model = model
        self.api_key = api_key or None
        self.api_base = api_base or None
        self.api_format = api_format or None
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.options = dict(options)
        self.cache_breakpoint = True
        """Whether requests carry `CACHE_BREAKPOINTS` (until the endpoint refuses one)."""
        self.env_prefix = str(self.options.get("env_prefix") or env_prefix(provider))
        if provider in NEEDS_API_BASE and not (self.api_base
                                               or os.environ.get(f"{self.env_prefix}_API_BASE")):
            # republic would fall back to the public OpenAI endpoint: a local model's
            # prompts (and key) must never leave the machine by default.
            raise HooklineError(
                ErrorKind.config,
                f"{spec}: {provider} needs the address of your server and none is set; set "
                f"{setting_env('api_base')} (or api_base in the config file, or "
                f"{self.env_prefix}_API_BASE), for example http://localhost:11434/v1",
                details={"provider": provider, "model": model},
            )
        # Build the provider once to report configuration errors now, not mid-run.
        checked = self._provider()
        # Shown in errors, logs and reprs: never with the user:password part of the URL.
        self.endpoint: str = redact_credentials(
            str(getattr(checked, "api_base", self.api_base or "")))

    def __repr__(self) -> str:
        return f"RepublicModel({self.name!r}, api_base={self.endpoint!r})"

    @property
    def key_configured(self) -> bool:
        return bool(self.api_key or os.environ.get(f"{self.env_prefix}_API_KEY"))

    def _provider(self, http_client: Any = None) -> Any:
        import republic
        from republic.errors import RepublicError

        _ensure_providers()
        options: dict[str, Any] = dict(self.options)
        if self.api_key:
            options["api_key"] = self.api_key
        if self.api_base:
            options["api_base"] = self.api_base
        if self.api_format:
            options["api_format"] = self.api_format
        if self.provider in CACHE_BREAKPOINTS and self.cache_breakpoint:  # the caller's wins
            options["extra_body"] = {**CACHE_BREAKPOINTS[self.provider],
                                     **(options.get("extra_body") or {})}
        options["max_retries"] = 0  # retried here, backend-neutrally
        if http_client is not None:
            options["http_client"] = http_client
        try:
            provider = republic.get_provider(self.provider, **options)
            provider.get_model(self.model)
        except RepublicError as exc:
            raise self._error(exc) from exc
        except (TypeError, ValueError) as exc:
            raise HooklineError(
                ErrorKind.config,
                f"{self.name}: invalid provider options for {self.provider!r}: {exc}.",
                details=self._details(),
            ) from exc
        return provider

    def _details(self, **extra: Any) -> dict[str, Any]:
        details: dict[str, Any] = {"provider": self.provider, "model": self.model}
        endpoint = getattr(self, "endpoint", None) or redact_credentials(self.api_base or "")
        if endpoint:
            details["api_base"] = endpoint
        details.update(extra)
        return details

    async def stream(
        self,
        messages: Sequence[Any],
        tools: Sequence[ToolSchema] = (),
        *,
        max_tokens: int | None = None,
        **options: Any,
    ) -> AsyncIterator[ModelEvent]:
        import anyio
        import httpx2
        from republic.errors import (
            APIConnectionError,
            APIStatusError,
            RepublicError,
            StreamIncompleteError,
        )

        try:
            republic_messages = to_republic_messages(messages)
            republic_tools = to_republic_tools(tools)
        except (TypeError, ValueError) as exc:
            raise HooklineError(
                ErrorKind.invalid_input,
                f"{self.name}: cannot send this conversation: {exc}",
                details=self._details(),
            ) from exc
        chat_options: dict[str, Any] = dict(options)  # the turn's, checked (options.py)
        if republic_tools:
            chat_options["tools"] = republic_tools
        if max_tokens is not None:
            chat_options["max_tokens"] = max_tokens
        started = False
        try:
            async with AsyncExitStack() as stack:
                client = self.options.get("http_client")
                if client is None:
                    from republic.providers.base import DEFAULT_TIMEOUT

                    client = httpx2.AsyncClient(
                        timeout=self.options.get("timeout", DEFAULT_TIMEOUT)
                    )
                    stack.push_async_callback(client.aclose)
                chat_model = self._provider(client).get_model(self.model)
                attempt = 0
                while True:  # retried here, each retry said as a `Retrying` event
                    try:  # a stream cut before anything of it arrived is retried too
                        async with AsyncExitStack() as call:
                            response_stream = await call.enter_async_context(
                                chat_model.stream(republic_messages, **chat_options))
                            events = await call.enter_async_context(
                                aclosing(response_stream.__aiter__()))
                            translated = await call.enter_async_context(
                                aclosing(self._translate(events)))
                            async for event in translated:
                                started = True
                                yield event
                        break
                    except (APIStatusError, APIConnectionError, StreamIncompleteError) as exc:
                        if started:
                            raise
                        if self._refuses_breakpoint(exc):
                            self.cache_breakpoint = False  # for this model's later calls too
                            logger.warning(
                                "%s: the endpoint refused the prompt-cache breakpoint "
                                "(cache_control), so hookline sends its requests without one "
                                "from now on; they are not cached", self.name)
                            chat_model = self._provider(client).get_model(self.model)
                            continue
                        wait = self._retry_wait(exc, attempt)
                        if wait is None:
                            raise self._error(exc, attempts=attempt + 1) from exc
                        attempt += 1
                        yield Retrying(reason(exc), wait, attempt + 1, self.max_retries + 1)
                        await anyio.sleep(wait)
        except HooklineError:
            raise
        except RepublicError as exc:
            raise self._error(exc, midstream=started) from exc
        except httpx2.HTTPError as exc:
            raise HooklineError(
                ErrorKind.provider,
                f"{self.name}: HTTP failure talking to {self.endpoint}: "
                f"{exc or type(exc).__name__}.",
                details=self._details(),
            ) from exc
        except Exception as exc:
            raise HooklineError(
                ErrorKind.provider,
                f"{self.name}: the model call failed: {type(exc).__name__}: {exc}",
                details=self._details(),
            ) from exc

    def _refuses_breakpoint(self, exc: Any) -> bool:
        """A 400 that names `cache_control` while one is sent: an endpoint that speaks the
        provider's API but not its caching (a proxy that checks every field)."""
        return (self.cache_breakpoint and self.provider in CACHE_BREAKPOINTS
                and getattr(exc, "status_code", None) == 400
                and "cache_control" in str(exc))

    def _retry_wait(self, exc: Any, attempt: int) -> float | None:
        """Seconds to wait before trying again, or None: the error is not one waiting
        fixes, the attempts are used up, or the provider asks for a longer wait than
        `max_retry_delay` (the `retry_max_wait` setting)."""
        if attempt >= self.max_retries or not retryable(exc):
            return None
        asked = retry_after(exc)
        if asked is not None:
            return asked if asked <= self.max_retry_delay else None
        delay = min(self.max_retry_delay, self.retry_delay * 2 ** min(attempt, 30))
        return delay * random.uniform(0.75, 1.0)  # jitter, not cryptography

    async def _translate(
        self, events: AsyncIterator[Any]
    ) -> AsyncGenerator[ModelEvent, None]:
        from republic.events import (
            Completed,
            RefusalDelta,
            ToolCallReady,
            UsageDelta,
        )
        from republic.events import TextDelta as RepublicTextDelta

        text: list[str] = []
        calls: list[ToolCallSpec] = []
        totals = dict.fromkeys(USAGE_FIELDS, 0)
        usage: dict[str, Any] | None = None
        async for event in events:
            if isinstance(event, RepublicTextDelta | RefusalDelta):
                if event.chunk:
                    chunk = valid_text(event.chunk)
                    text.append(chunk)
                    yield TextDelta(chunk)
            elif isinstance(event, ToolCallReady):
                call = event.call
                spec = ToolCallSpec(
                    call.id or f"call-{len(calls) + 1}",
                    call.name,
                    valid_arguments(call.arguments or "{}"),
                    metadata=dict(call.metadata or {}),
                )
                calls.append(spec)
                yield ToolCallEvent(spec)
            elif isinstance(event, UsageDelta):
                for key in totals:
                    totals[key] += int(getattr(event.usage, key, 0) or 0)
                usage = usage_dict(**totals)
                yield Usage(dict(usage))
            elif isinstance(event, Completed):
                final = event.response.token_usage
                reported = {key: int(getattr(final, key, 0) or 0) for key in totals}
                if any(reported.values()):
                    usage = usage_dict(**reported)
            # Reasoning, citations, images and provider-side tool calls are not used yet.
        yield Finished("".join(text), calls, usage)

    # Errors ------------------------------------------------------------------------------

    def _error(self, exc: BaseException, *, attempts: int = 1,
               midstream: bool = False) -> HooklineError:
        """The provider's failure as one HooklineError saying what to fix (failures.py)."""
        endpoint = getattr(self, "endpoint", None) or redact_credentials(self.api_base or "")
        subject = Subject(self.name, self.provider, self.model,
                          endpoint or DEFAULT_ENDPOINT, self.env_prefix,
                          self.key_configured, self.max_retry_delay, self.api_format,
                          self._details())
        return describe_failure(subject, exc, attempts=attempts, midstream=midstream)
