"""The model-client abstraction the agent loop talks to.

A model client turns a conversation (`ModelMessage` list) and the tool schemas offered
to the model (`ToolSchema`) into a stream of events. The types here are hookline's own,
independent of republic, so the offline and scripted models and plugin-provided clients
need no third-party package; `republic_client` converts them for real providers.

Stream contract (every `ModelClient.stream` implementation):

- `stream(messages, tools, *, max_tokens=None, **options)` returns an async generator;
  `options` are the turn's model options (`models/options.py`: `temperature`, `top_p`,
  ...), passed only when the turn set some, so a client that takes none may leave them
  out of its signature;
- it yields any number of `TextDelta`, `ToolCallEvent` and `Usage` events, then exactly
  one `Finished` as the last event when the call succeeded; before any of them, a
  `Retrying` for each retry of a call that failed;
- `Usage.data` is the cumulative usage so far (a later event replaces an earlier one);
  `Finished.usage` is the final usage, None when the provider reported none;
- a failure is raised as `HooklineError` (kind `config`, `provider`, `invalid_input`, ...)
  from the iteration, never yielded as an event;
- the consumer may stop early: closing the generator (`aclose()`, `aclosing`, or
  cancellation) releases everything the call holds (HTTP connections included).

Messages: `ModelMessage.content` is a string or a list of content items: strings,
republic media objects (`republic.Image/Audio/Video`) or legacy blocks
(`{"type": "text", "text": ...}`, `{"type": "image", "media_type": ..., "url": ...}`).
republic `Message` objects are accepted wherever messages are read (`as_model_message`),
so a conversation edited by a before_llm_call hook can be passed back in.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from hookline.kernel.messages import (
    ContentItem,
    ModelMessage,
    Role,
    ToolCallSpec,
)

__all__ = [
    "USAGE_FIELDS",
    "ContentItem",
    "Finished",
    "ModelClient",
    "ModelEvent",
    "ModelMessage",
    "Role",
    "TextDelta",
    "ToolCallEvent",
    "ToolCallSpec",
    "ToolSchema",
    "Usage",
    "usage_dict",
]

OVERFLOW_TEXT = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|too many tokens|"
    r"prompt is too long|input is too long|reduce the length|exceeds? the available context "
    r"size|exceed_context_size|exceeds the maximum number of tokens|prompt too long|"
    r"exceeded max context length", re.I)
"""What providers say when a request is longer than the model's context window (OpenAI's
and the servers that copy it, Anthropic, Mistral, Gemini's OpenAI-compatible API,
llama.cpp's server, Ollama, Bedrock, Groq, Cohere)."""

_STATED_WINDOW = (
    re.compile(r"(?:maximum context length|context (?:window|length)|limit)"
               r"(?:(?!\bby\b)\D){0,20}(\d[\d,]{2,})\s*tokens", re.I),
    re.compile(r">\s*(\d[\d,]{2,})\s*maximum", re.I),
    re.compile(r"(\d[\d,]{2,})\s*maximum context length", re.I),
    re.compile(r"maximum number of tokens allowed\s*\((\d[\d,]{2,})\)", re.I),
    re.compile(r"\"n_ctx\"\s*:\s*(\d{3,})"),
)
"""Where an overflow error states the window: "maximum context length is 8192 tokens"
(OpenAI, vLLM), "208000 tokens > 200000 maximum" (Anthropic), "too large for model with
32768 maximum context length" (Mistral), "the maximum number of tokens allowed (1048576)"
(Gemini), `"n_ctx": 4096` in llama.cpp's error body."""
MIN_STATED_WINDOW = 512
"""A smaller number an overflow error gives is not its window (by how much it passed it)."""


def stated_window(text: str) -> int:
    """The context window an overflow error's text states, 0 when it states none."""
    for pattern in _STATED_WINDOW:
        if (found := pattern.search(text)) and (
                window := int(found.group(1).replace(",", ""))) >= MIN_STATED_WINDOW:
            return window
    return 0


USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "cache_write_tokens",
)


def _empty_object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolSchema:
    """What the model sees of a tool: name, description and JSON schema of the arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=_empty_object_schema)


def usage_dict(
    input_tokens: int = 0,
    output_tokens: int = 0,
    reasoning_tokens: int = 0,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> dict[str, int]:
    """Token usage in the shape every client reports: the fields plus `total_tokens`."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "reasoning_tokens": reasoning_tokens,
        "cached_tokens": cached_tokens,
        "cache_write_tokens": cache_write_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


# Stream events -------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply text."""

    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    """A complete tool call (arguments fully streamed)."""

    call: ToolCallSpec


@dataclass(frozen=True)
class Usage:
    """Token usage so far (cumulative; see `usage_dict` for the keys)."""

    data: dict[str, Any]


@dataclass(frozen=True)
class Finished:
    """The last event of a successful call: the whole reply."""

    text: str = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: dict[str, Any] | None = None


@dataclass(frozen=True)
class Retrying:
    """The call failed before anything arrived and is tried again after `wait` seconds:
    `attempt` (from 2) of `attempts`, for `reason` (`HTTP 429`, `connection failed`)."""

    reason: str
    wait: float
    attempt: int
    attempts: int


ModelEvent: TypeAlias = TextDelta | ToolCallEvent | Usage | Finished | Retrying


@runtime_checkable
class ModelClient(Protocol):
    """Anything that can answer a conversation as a stream of events.

    `name` is the `provider:model` spec the client serves (`offline`,
    `scripted:<path>`, `openai:gpt-4o-mini`, ...). See the module docstring for the
    stream contract.
    """

    name: str

    def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolSchema] = (),
        *,
        max_tokens: int | None = None,
        **options: Any,
    ) -> AsyncIterator[ModelEvent]: ...
