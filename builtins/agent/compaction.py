"""Keeping a session's requests within the model's context: the token budget, the estimate
of a request's size, and compaction (one model call summarises the context, written as a
handoff anchor, so the next request starts from the summary; docs/context.md). The
summary call repeats the request the conversation made, whose start a provider's prompt
cache holds, when that fits the budget (`/compact` before the budget is reached).

The estimate needs no tokenizer: a request's characters times the tokens per character
the provider reported for the previous call of that model (4 characters a token until a
call has been measured). The window of a model comes from the `context_window` setting,
else from the table below, else from what an overflow error said, else 128,000 tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.messages import ModelMessage

from ..models.base import OVERFLOW_TEXT, ToolSchema, stated_window

__all__ = [
    "COMPACTION_ANCHOR",
    "COMPACTION_PROMPT",
    "CONTINUE_AFTER_COMPACTION",
    "DEFAULT_WINDOW",
    "MAX_SUMMARY_CHARS",
    "MAX_SUMMARY_TOKENS",
    "MIN_SUMMARY_TOKENS",
    "ContextMeter",
    "may_send_as_text",
    "overflow_limit",
    "summary_as_text",
    "summary_in_place",
    "summary_tokens",
]

DEFAULT_WINDOW = 128_000
"""Tokens assumed for a model nobody said anything about."""

WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4.1", 1_047_576), ("gpt-5", 400_000), ("gpt-4o", 128_000), ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192), ("gpt-3.5", 16_385), ("o1", 200_000), ("o3", 200_000), ("o4", 200_000),
    ("claude", 200_000), ("gemini", 1_048_576), ("llama", 128_000), ("mistral", 32_000),
    ("qwen", 32_768), ("deepseek", 64_000), ("kimi", 128_000), ("glm", 128_000),
)
"""Context windows of common model families, by the first family name found in the
model's name (the provider prefix left out); documented in docs/context.md."""

CHARS_PER_TOKEN = 4.0
"""The estimate before a call of the model has been measured."""
RATIO_BOUNDS = (1 / 6, 3 / 2)
"""Tokens per character a measurement may set (English text and code run from about 2.5 to
5 characters a token, Chinese or Japanese text up to about one and a half tokens a
character): a provider that under-reports cannot make every request look small."""

MAX_SUMMARY_TOKENS = 2_000
MAX_SUMMARY_CHARS = 12_000
"""A summary is asked for in at most this many tokens and kept to this many characters."""
MIN_SUMMARY_TOKENS = 200
"""What a summary may take however small the window (`summary_tokens`)."""

COMPACTION_ANCHOR = "compaction"
"""The name of the anchor a compaction writes (its state: `summary`, `reason`, `tokens`)."""

COMPACTION_PROMPT = """\
You are summarising a conversation between a user and a coding agent so that the agent \
can continue it with only your summary. Write, in plain text and at most about 1,500 \
words: the user's goals and instructions (quote exact requirements), what has been done \
(files changed, commands run, their outcomes), decisions and their reasons, open \
problems, and the next steps. Keep names, paths, numbers and error messages exact. Do \
not invent anything; leave out pleasantries."""

CONTINUE_AFTER_COMPACTION = (
    "[The conversation so far was compacted into the summary above, to stay within the "
    "model's context. Continue the task you were working on.]")
"""The user message a compaction in the middle of a turn leaves for the next step."""


def family_window(model: str) -> int | None:
    """The table's window for a `provider:model` spec, or None."""
    name = model.partition(":")[2].lower() or model.lower()
    for family, window in WINDOWS:
        if family in name:
            return window
    return None


def overflow_limit(error: BaseException) -> int | None:
    """For a provider error that says the request was too long: the window it states (0
    when it states none); None for any other error."""
    text = str(getattr(error, "message", "") or error)
    if not isinstance(error, HooklineError) or error.kind is not ErrorKind.provider:
        return None
    if not OVERFLOW_TEXT.search(text):
        return None
    stated = (error.details or {}).get("stated_window")  # read from the whole error body
    return stated if isinstance(stated, int) and stated > 0 else stated_window(text)


MEDIA_CHARS = 6_000
"""What an image or another media part counts as (about 1,500 tokens, what providers
charge for a large image), whatever the size of its data."""


def request_chars(messages: Sequence[ModelMessage], tools: Sequence[ToolSchema]) -> int:
    """The size of a request as the estimate counts it: its messages (a media part as
    `MEDIA_CHARS`) and tool schemas."""
    size = sum(_content_chars(message.content) + sum(len(call.name) + len(call.arguments)
                                                     for call in message.tool_calls)
               for message in messages)
    return size + sum(len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
                      for tool in tools)


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(part) if isinstance(part, str) else MEDIA_CHARS for part in content)
    return len(str(content or ""))


@dataclass
class ContextMeter:
    """What is known of each model's window and of its tokens per character."""

    configured: int | None = None
    """The `context_window` setting (None: by model)."""
    budget: float = 0.8
    """The share of the window a request may use (the `context_budget` setting)."""
    learned: dict[str, int] = field(default_factory=dict)
    """Windows stated by overflow errors, by model."""
    ratio: dict[str, float] = field(default_factory=dict)
    """Tokens per character of the last measured call, by model."""

    def window(self, model: str) -> int:
        if self.configured:
            return self.configured
        return self.learned.get(model) or family_window(model) or DEFAULT_WINDOW

    def limit(self, model: str) -> int:
        """The most tokens a request to `model` may hold."""
        return int(self.window(model) * self.budget)

    def estimate(self, model: str, chars: int) -> int:
        return int(chars * self.ratio.get(model, 1 / CHARS_PER_TOKEN)) + 1

    def chars_for(self, model: str, tokens: int) -> int:
        """About how many characters make `tokens` tokens for `model`."""
        return int(tokens / self.ratio.get(model, 1 / CHARS_PER_TOKEN))

    def measured(self, model: str, chars: int, usage: dict[str, Any] | None) -> None:
        """Learn the model's tokens per character from a call's reported input tokens."""
        tokens = (usage or {}).get("input_tokens")
        if isinstance(tokens, int) and tokens > 0 and chars > 0:
            self.ratio[model] = _bounded_ratio(tokens / chars)

    def known(self, model: str) -> dict[str, Any]:
        """What was learned of `model`, for the tape: a later process recalls it."""
        known: dict[str, Any] = {}
        if model in self.ratio:
            known["tokens_per_char"] = self.ratio[model]
        if model in self.learned:
            known["stated_window"] = self.learned[model]
        return known

    def recall(self, model: str, known: Mapping[str, Any]) -> None:
        """Take back what `known()` kept, within the bounds a measurement may set."""
        ratio, window = known.get("tokens_per_char"), known.get("stated_window")
        if isinstance(ratio, int | float) and not isinstance(ratio, bool):
            self.ratio.setdefault(model, _bounded_ratio(float(ratio)))
        if (isinstance(window, int) and not isinstance(window, bool) and window > 0
                and model not in self.learned):
            self.overflowed(model, window)

    def overflowed(self, model: str, stated: int) -> None:
        """An overflow error stated the window (or did not: then the request was too
        large for what was assumed, and the assumption shrinks to a quarter less)."""
        current = self.window(model)
        self.learned[model] = stated if stated > 0 else int(current * 0.75)
        if self.configured and stated and stated < self.configured:
            self.configured = stated


def _bounded_ratio(ratio: float) -> float:
    low, high = RATIO_BOUNDS
    return min(high, max(low, ratio))


def may_send_as_text(error: HooklineError) -> bool:
    """Whether a summary call that repeated the request and failed may be sent again as a
    text (without tools: a server may refuse `tool_choice`): unless the key, the model's
    name, the quota or a rate limit failed it, which would fail the text the same way."""
    return (error.details or {}).get("status") not in (401, 403, 404, 429)


OPENING_NOTE = "[What this conversation holds so far:]"
"""The user message a request starts with when its conversation starts with an assistant
note (an anchor's summary after a compaction or a handoff): Anthropic's API refuses a
first message that is not the user's."""


def request_messages(system: str, conversation: Sequence[ModelMessage]) -> list[ModelMessage]:
    """What a model call sends: the system prompt, then the conversation, opened by a user
    message (`OPENING_NOTE`) when it would open with the assistant's."""
    head = [ModelMessage.system(system)] if system else []
    if conversation and conversation[0].role == "assistant":
        head.append(ModelMessage.user(OPENING_NOTE))
    return [*head, *conversation]


def summary_in_place(system: str, conversation: Sequence[ModelMessage],
                     instructions: str) -> list[ModelMessage]:
    """The messages of a summary call that repeats the conversation's own request (its
    system prompt, then its messages), so that a provider's prompt cache serves all of it,
    then the prompt as the last user message. Sent with the turn's tools, none allowed."""
    return [*request_messages(system, conversation),
            ModelMessage.user(f"{COMPACTION_PROMPT}\n\n{_summary_ask(instructions)}")]


def summary_as_text(conversation: Sequence[ModelMessage], instructions: str,
                    max_chars: int) -> list[ModelMessage]:
    """The messages of a summary call for a conversation not repeated whole: the prompt,
    then the conversation as one text (past `max_chars`, its middle left out: the start
    holds the task, the end where it stands), then the request."""
    lines = [_as_text(message) for message in conversation]
    text = "\n\n".join(line for line in lines if line)
    if len(text) > max_chars:
        head = max_chars // 4
        text = (f"{text[:head]}\n\n[... {len(text) - max_chars:,} characters left out ...]"
                f"\n\n{text[-(max_chars - head):]}")
    return [ModelMessage.system(COMPACTION_PROMPT),
            ModelMessage.user(f"<conversation>\n{text}\n</conversation>\n\n"
                              f"{_summary_ask(instructions)}")]


def _summary_ask(instructions: str) -> str:
    ask = "Summarise the conversation above as instructed."
    if instructions.strip():
        ask += f" The user asks you to focus on: {instructions.strip()}"
    return ask


def _as_text(message: ModelMessage) -> str:
    content = message.content if isinstance(message.content, str) else json.dumps(
        [part if isinstance(part, str) else "[media]" for part in message.content or []])
    calls = "".join(f"\n[calls {call.name}: {call.arguments}]" for call in message.tool_calls)
    if not content and not calls:
        return ""
    return f"{message.role}: {content}{calls}"


def bounded_summary(text: str, chars: int = MAX_SUMMARY_CHARS) -> str:
    """The summary as kept: stripped, and cut to `chars` (at most `MAX_SUMMARY_CHARS`)."""
    text, chars = text.strip(), min(chars, MAX_SUMMARY_CHARS)
    return text if len(text) <= chars else text[:chars] + " [...]"


def summary_tokens(limit: int, fixed: int) -> int:
    """What a summary may take: `MAX_SUMMARY_TOKENS`, or half of what the budget (`limit`
    tokens) leaves beside the system prompt and the tools (`fixed`), if less (a small
    window), so that the summary always makes room; `MIN_SUMMARY_TOKENS` at least."""
    return max(MIN_SUMMARY_TOKENS, min(MAX_SUMMARY_TOKENS, (limit - fixed) // 2))
