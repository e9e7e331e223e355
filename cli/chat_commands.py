"""The commands `hookline chat` runs itself, never sending them to the model: `/new`,
`/sessions`, `/resume`, `/model`, `/usage`, `/attach` and `/compact` (the cli channel has
`/help` and `/quit`, and tells commands from messages: builtins/channels/cli/input.py).

They reuse what the other commands do: `/new` chooses a session as `--new` does, `/resume`
switches to another (and `recap` shows what a session already holds, also when the chat
opens one), `/sessions` prints `hookline sessions`' table, `/usage` sums the `usage`
stream events as `run --usage` does (`UsageTotals`, builtins/terminal/usage.py), `/attach`
reads files as `run -a` does (`inputs.attachments`). `/model NAME` sets the turn setting
`model` of the envelopes' context, which the builtin plugin reads (an alias of
`model_aliases` works too).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookline.kernel import Framework

if TYPE_CHECKING:
    from collections.abc import Mapping

    from hookline.builtins.channels import ChatChannel, ChatCommand
    from hookline.builtins.terminal import UsageTotals
    from hookline.kernel.streaming import StreamEvent


RECAP_TURNS, RECAP_LINES, RECAP_WIDTH = 2, 12, 160
"""A resumed session's recap: its last turns, at most so many lines, each cut so wide."""


class ChatCommands:
    """The commands of one chat, on its channel; `session_id` is the resolved id of the
    session the chat's lines go to, `model` the model shown for it."""

    def __init__(self, framework: Framework, channel: ChatChannel, session_id: str,
                 model: str) -> None:
        self.framework = framework
        self.channel = channel
        self.session_id = session_id
        self.model = model
        self.usage: dict[str, UsageTotals] = {}
        """Token usage of this chat's turns, by session."""
        self._price_table: Any = None
        self._running: Any = None
        """The cancel scope of a command that waits on the model (`/compact`), if any."""

    def cancel_running(self) -> bool:
        """Ctrl-C while a command waits on the model: it, not the chat, is cancelled.
        True when one was running."""
        if self._running is None:
            return False
        self._running.cancel()
        return True

    def commands(self) -> list[ChatCommand]:
        from hookline.builtins.channels import ChatCommand

        return [
            ChatCommand("new", self.new, "a fresh session, made this folder's current one"),
            ChatCommand("sessions", self.sessions, "the sessions, as hookline sessions lists "
                                                   "them (* marks this folder's current one)"),
            ChatCommand("resume", self.resume, "switch to another session (made this "
                                               "folder's current one) and show its last turns",
                        "ID"),
            ChatCommand("model", self.set_model, "the model for the following turns (an "
                                                 "alias works too); no NAME: the one in use",
                        "NAME"),
            ChatCommand("usage", self.show_usage, "tokens in and out (and cost) of this "
                                                  "chat's turns and of the whole session"),
            ChatCommand("attach", self.attach, "attach a file (text or image) to the next "
                                               "message", "PATH"),
            ChatCommand("compact", self.compact, "summarise this session's context now, to "
                                                 "free room (optional: what to keep)",
                        "[INSTRUCTIONS]"),
        ]

    def observe(self, session_id: str, event: StreamEvent) -> None:
        """Every event of the chat's turns: each `usage` event is one model call's count."""
        if event.kind not in ("usage", "final"):
            return
        from hookline.builtins.terminal import UsageTotals

        totals = self.usage.setdefault(session_id, UsageTotals(self._prices()))
        if event.kind == "usage":
            totals.add(event.data.get("usage"), event.data.get("model"),
                       bool(event.data.get("summary")))
            window_of = self._window_of()
            if totals.last_input is not None and window_of is not None:
                tokens, window = totals.last_input[1], window_of(totals.last_input[0])
                self.channel.status_note = f"context {100 * tokens / window:.0f}% of {window:,}"
        else:
            totals.calls += 1

    async def new(self, arguments: str) -> None:
        from hookline.builtins.config import default_home
        from hookline.builtins.tape import new_session_id, set_current_session

        _no_arguments("new", arguments)
        fresh = new_session_id()
        set_current_session(default_home(), self.framework.workspace, fresh)
        self.channel.configure(session_id=fresh)
        self.session_id = await self.framework.resolve_session(
            {"channel": self.channel.name, "chat_id": self.channel.chat_id,
             "session_id": fresh})
        self._say(f"new session {self.session_id}, now this folder's current one (the "
                  f"previous one is kept: /sessions)")

    async def resume(self, arguments: str) -> None:
        from hookline.builtins.config import default_home
        from hookline.builtins.tape import find_session, set_current_session

        name = arguments.strip()
        if not name:
            raise ValueError("give the session to switch to: /resume ID (/sessions lists them)")
        await find_session(self._store(), name, self.framework.workspace)  # it exists
        set_current_session(default_home(), self.framework.workspace, name)
        self.channel.configure(session_id=name)
        self.session_id = await self.framework.resolve_session(
            {"channel": self.channel.name, "chat_id": self.channel.chat_id, "session_id": name})
        self._say(f"session {self.session_id}, now this folder's current one")
        await self.recap(name)

    async def recap(self, name: str) -> None:
        """What a session already holds, when the chat opens it: how many turns, and the
        last ones briefly (`hookline sessions show` has them whole)."""
        from hookline.builtins.tape import SessionError, find_session, last_turns, transcript

        try:
            tape = await find_session(self._store(), name, self.framework.workspace)
        except SessionError:
            return  # a new session: nothing to show
        entries, turns = await last_turns(self._store(), tape, RECAP_TURNS)
        if not turns:
            return
        lines = list(transcript(entries))
        shown = lines[-RECAP_LINES:]
        self._say(f"session {name} has {turns} turn{'s' if turns != 1 else ''}; the last "
                  f"{min(turns, RECAP_TURNS)} (hookline sessions show {name} has them all):")
        if len(shown) < len(lines):
            self._say("…")
        for line in shown:
            self._say(one_line_of(line))

    def _store(self) -> Any:
        from hookline.builtins.store import scope_store

        store = scope_store(self.framework)
        if store is None:
            raise RuntimeError("no plugin provides a tape store (provide_tape_store), so "
                               "there are no sessions")
        return store

    async def sessions(self, arguments: str) -> None:
        from hookline.builtins.tape import list_sessions

        from .sessions import session_list

        _no_arguments("sessions", arguments)
        for line in session_list(self.framework, await list_sessions(self._store())):
            self._say(line)
        self._say("(/resume ID switches to one)")

    async def set_model(self, arguments: str) -> None:
        from hookline.builtins.config import load_settings

        name = arguments.strip()
        if not name:
            self._say(f"model {self.model} (/model NAME changes it for the following turns)")
            return
        spec = load_settings().resolve_model(name)
        if not _looks_like_spec(spec):
            raise ValueError(f"{name!r} is neither a model spec nor an alias of "
                             f"model_aliases; give provider:model, offline or "
                             f"scripted:<path>, or an alias (hookline models lists them)")
        provider = spec.partition(":")[0]
        if provider not in ("offline", "scripted"):  # a typo costs no turn
            from hookline.builtins.models import known_providers

            known = known_providers()
            if provider not in known:
                raise ValueError(f"unknown provider {provider!r} in {spec!r}: one of "
                                 f"{', '.join(known)}, offline or scripted")
        self.channel.configure(model=name)
        self.model = name
        shown = name if spec == name else f"{name} ({spec})"
        self._say(f"model {shown} for the following turns of this chat")

    async def show_usage(self, arguments: str) -> None:
        from hookline.builtins.terminal import UsageTotals

        from .usage import session_totals

        _no_arguments("usage", arguments)
        totals = self.usage.get(self.session_id) or UsageTotals(self._prices())
        self._say(f"{totals.line()} (session {self.session_id}, the turns of this chat)")
        recorded = await session_totals(self.framework, self.session_id, self._prices())
        if recorded is not None and recorded.reported:
            self._say(f"{recorded.line('session')} (every turn and compaction on its tape)")
        window_of = self._window_of()
        if totals.last_input is not None and window_of is not None:
            from hookline.builtins.terminal import meter_line

            self._say(meter_line(totals.last_input[1], window_of(totals.last_input[0])))

    async def compact(self, arguments: str) -> None:
        from hookline.builtins import builtin_services
        from hookline.builtins.terminal import UsageTotals, turn_note

        builtin = builtin_services(self.framework)
        if builtin is None:
            raise RuntimeError("compaction is the builtin plugin's, which is not loaded")
        busy = getattr(self.framework.router, "busy_sessions", None)
        if busy is not None and self.session_id in busy():
            raise RuntimeError("a turn is running: /compact once it has answered")
        import anyio

        said = None
        with anyio.CancelScope() as self._running:
            said = await builtin.compact_session(
                self.session_id, arguments.strip(), self.channel.model,
                starting=lambda: self._say("compacting: the model summarises this session's "
                                           "context ..."),
                retrying=lambda data: self._say(turn_note("retry", data) or ""))
        cancelled, self._running = self._running.cancelled_caught, None
        if cancelled:
            self._say("(/compact cancelled with Ctrl-C: nothing was written)")
            return
        for line in compaction_said(self.session_id, said, self._prices()):
            self._say(line)
        if said is not None:  # the summary call counts; the meter shows what is left
            totals = self.usage.setdefault(self.session_id, UsageTotals(self._prices()))
            totals.add_run(said)
            totals.last_input = (said.get("model"), int(said["tokens_after"]))

    def _window_of(self) -> Any:
        """The context window of a model, as the builtin agent assumes it (or None)."""
        from hookline.builtins import builtin_services

        builtin = builtin_services(self.framework)
        return builtin.context_window if builtin is not None else None

    def _prices(self) -> Any:
        if self._price_table is None:
            from .usage import configured_prices

            self._price_table = configured_prices()
        return self._price_table

    async def attach(self, arguments: str) -> None:
        from .inputs import attachments

        if not arguments.strip():
            raise ValueError("give the file to attach: /attach PATH")
        path = Path(_one_path(arguments)).expanduser()
        text, media = attachments([path])
        self.channel.attach(text, media)
        kind = "an image" if media else "text"
        self._say(f"attached {path} ({kind}) to the next message")

    def _say(self, text: str) -> None:
        from hookline.builtins.terminal import terminal_text

        self.channel.say(terminal_text(text, keep_newlines=False))


def one_line_of(line: str) -> str:
    """A transcript line of the recap, cut to one line of the terminal."""
    from hookline.builtins.tape import one_line

    return one_line(line, RECAP_WIDTH)


def _no_arguments(name: str, arguments: str) -> None:
    if arguments.strip():
        raise ValueError(f"/{name} takes no arguments (got {arguments.strip()!r})")


def _one_path(arguments: str) -> str:
    """The path of `/attach PATH`: as typed, or unquoted when it is in quotes."""
    text = arguments.strip()
    if text[:1] in ("'", '"'):
        try:
            parts: list[Any] = shlex.split(text)
        except ValueError:
            parts = []
        if len(parts) == 1:
            return str(parts[0])
    return text


def _looks_like_spec(spec: str) -> bool:
    if spec == "offline" or spec.startswith("offline:"):
        return True
    provider, sep, model = spec.partition(":")
    return bool(sep and provider.strip() and model.strip()) and " " not in spec


def compaction_said(session_id: str, said: dict[str, Any] | None,
                    prices: Mapping[str, Any] | None = None) -> list[str]:
    """The lines `/compact` and `hookline compact` report: what was compacted, then what
    the summary call used (and cost, reported or from `prices`)."""
    if said is None:
        return [f"session {session_id}: nothing to compact yet"]
    from hookline.builtins.terminal import UsageTotals

    used = UsageTotals(prices)
    used.add_run({"usage_by_model": said.get("usage_by_model") or {}})
    return [f"session {session_id}: compacted about {int(said['tokens_before']):,} tokens of "
            f"context into about {int(said['tokens_after']):,}, from a summary of "
            f"{int(said['summary_chars']):,} characters (anchor compaction; everything "
            f"before it stays on the tape)",
            used.line("the summary call")]
