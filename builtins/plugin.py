"""The builtin plugin: real defaults for every hook that has one.

It is registered first (under the name ``builtin``), so every plugin registered after it
runs before it and can replace any default by answering first. Settings are read
lazily, on first use, so a bad config file is reported by the command that needs it.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookline.kernel import hookimpl
from hookline.kernel.channels import (
    ApprovalRouter,
    Channel,
    MessageHandler,
)
from hookline.kernel.envelope import (
    context_str,
    default_session_id,
    get_field,
)
from hookline.kernel.events import RunFinished, StepStarted
from hookline.kernel.interception import ToolCall, ToolCallDecision, ToolCallResult
from hookline.kernel.models import ModelChoice, ModelOptions
from hookline.kernel.tape import TapeContext
from hookline.kernel.tools import Tool
from hookline.kernel.turn import RUNTIME_ENVIRONMENT, RUNTIME_THREAD_ID, RUNTIME_WORKSPACE

from .config.limits import CONTEXT_WINDOW, check_session_fields
from .models.options import MODEL_OPTIONS_STATE, checked_model_options

if TYPE_CHECKING:
    from .agent.loop import Agent
    from .agent.steering import InMemorySteeringInbox
    from .approval.gate import ApprovalGate
    from .config import Settings
    from .host.background import BackgroundProcesses
    from .host.environment import LocalEnvironment
    from .host.instructions import WorkspaceInstructions
    from .host.sandbox import SandboxPolicy
    from .mcp.manager import McpServers
    from .store import InMemoryTapeStore
    from .tape.spill import SpillSidecar
    from .tape.tape import Tape

# The framework has loaded the whole kernel already. The builtin modules behind the hooks
# (the agent, the tape, the stores, the models, the tools, the settings) are imported by
# the hooks that use them, on first use: every command builds this plugin, and
# `hookline --help` runs none of its hooks.

logger = logging.getLogger(__name__)

_TURN_SETTINGS = ("model", "system", "thread_id", "options")
"""Envelope context keys `load_state` takes as the turn's settings."""

TURN_SYSTEM = "turn_system_prompt"
"""State key of a system prompt for one turn (`hookline run --system`, context `system`)."""

DEFAULT_SYSTEM_PROMPT = """\
You are hookline's agent, working in the user's workspace. Answer directly and briefly.
Use the tools when the task needs them: shell to run commands, fs_read / fs_write /
fs_edit for files (paths are relative to the workspace), tape_search and tape_info to
look back at this session. Say what you did and what you found."""

PROCESS_RECORDS = "processes"
"""Folder of the hookline home holding one process record per open scope."""


class BuiltinPlugin:
    """Default implementations; ``settings`` may be given (tests) or read on first use."""

    sweep_seconds: float | None = 5.0
    """How often the lifespan reaps adopted orphans and closes idle environments (None:
    never); the one place the period is written, so building the plugin imports no
    lifespan module to learn it."""

    def __init__(self, framework: Any, settings: Settings | None = None) -> None:
        self.framework = framework
        self._settings = settings
        self._agent: Agent | None = None
        self._processes: BackgroundProcesses | None = None
        self._memory_store: InMemoryTapeStore | None = None
        self._instructions: WorkspaceInstructions | None = None
        self._sandbox: tuple[Settings, SandboxPolicy] | None = None
        self._store_probe: threading.Event | None = None  # set when the last check ended
        self._mcp: tuple[Settings, McpServers | None] | None = None
        self._own_tools: tuple[BackgroundProcesses, tuple[Tool, ...]] | None = None
        self._approvals: ApprovalGate | None = None

    # Settings, the background processes and the memory store are made on first use, by a
    # command that needs them.

    @property
    def processes(self) -> BackgroundProcesses:
        """The background processes of this plugin's environments, tools and lifespan."""
        if self._processes is None:
            from .host.background import BackgroundProcesses

            self._processes = BackgroundProcesses()
        return self._processes

    @processes.setter
    def processes(self, processes: BackgroundProcesses) -> None:
        self._processes = processes

    @property
    def memory_store(self) -> InMemoryTapeStore:
        """Used by turns run outside running(), where no tape store is provided."""
        if self._memory_store is None:
            from .store.memory import InMemoryTapeStore

            self._memory_store = InMemoryTapeStore()
        return self._memory_store

    @memory_store.setter
    def memory_store(self, store: InMemoryTapeStore) -> None:
        self._memory_store = store

    def get_settings(self) -> Settings:
        if self._settings is None:
            from .config import load_settings

            settings = load_settings()
            if settings.extra:  # the config file's [[rules]] are checked at start
                from .approval.rules import check_config_rules

                check_config_rules(settings)
            self._settings = settings
        return self._settings

    def get_agent(self) -> Agent:
        if self._agent is None:
            from .agent.loop import Agent, AgentConfig
            from .models.opening import ModelOpener

            settings = self.get_settings()
            config = AgentConfig(settings.model_spec, settings.max_steps, settings.max_tokens,
                                 settings.context_window, settings.context_budget,
                                 CONTEXT_WINDOW, settings.compaction)
            self._agent = Agent(self.framework, config, ModelOpener(settings), self.tape_for)
            self._agent.bus.on(StepStarted, self._refresh_instructions)
            self._agent.bus.on(RunFinished, self._say_what_commands_made)
            if self.mcp_servers() is not None:
                self._agent.prepare_tools = self._prepare_mcp
        return self._agent

    async def compact_session(self, session_id: str, instructions: str = "",
                              model: str | None = None,
                              starting: Callable[[], None] | None = None,
                              retrying: Callable[[dict[str, Any]], None] | None = None
                              ) -> dict[str, Any] | None:
        """Summarise the session's context now (docs/context.md); None: nothing to do.
        `starting` is called once the summary call is about to be made, `retrying` with
        each retry of it (a `retry` stream event's data)."""
        state = {"session_id": session_id, RUNTIME_WORKSPACE: str(self.framework.workspace)}
        return await self.get_agent().compact(session_id, state, model, instructions, starting,
                                              retrying)

    def context_window(self, model: str | None = None) -> int:
        """The context window the agent assumes for `model` (default: the configured one)."""
        agent = self.get_agent()
        return agent.meter.window(model or agent.config.model)

    def tape_for(self, session_id: str, state: dict[str, Any]) -> Tape:
        """The session's tape on the scope's store, with the hooks' context and sidecars."""
        from .store.asyncstore import scope_store
        from .tape.naming import resolved_workspace, session_tape_name
        from .tape.tape import Tape

        store = scope_store(self.framework) or self.memory_store
        context = replace(self.framework.build_tape_context(), state=state)
        workspace = resolved_workspace(self.framework.workspace)
        return Tape(store, session_tape_name(session_id, workspace), context,
                    self.framework.get_tape_sidecars(),
                    session={"id": session_id, "workspace": workspace})

    # -- turn ----------------------------------------------------------------------------

    @hookimpl
    def resolve_session(self, message: Any) -> str:
        """The default id; a `session_id` or `chat_id` over the length cap is refused."""
        check_session_fields(message)
        return default_session_id(message)

    @hookimpl
    def load_state(self, message: Any, session_id: str) -> dict[str, Any]:
        context = get_field(message, "context") or {}
        # The turn's settings are no words of the message: never in its context prefix.
        shown = {key: value for key, value in context.items() if key not in _TURN_SETTINGS}
        state: dict[str, Any] = {"session_id": session_id, "context": context_str(shown)}
        for key, name in (("model", "model"), ("system", TURN_SYSTEM),
                          ("thread_id", RUNTIME_THREAD_ID)):
            if context.get(key):
                state[name] = str(context[key])
        if context.get("options"):  # `run -o`: checked again, whatever channel sent them
            state[MODEL_OPTIONS_STATE] = checked_model_options(context["options"])
        from .tape.requests import REQUEST_CONTEXT as MARKS  # the request's id and key

        if isinstance(context.get(MARKS), dict):  # recorded with its message
            state[MARKS] = dict(context[MARKS])
        router = self.framework.router
        asker = router.approval_asker(message) if isinstance(router, ApprovalRouter) else None
        if asker is not None:  # the channel that can ask a person (docs/approvals.md)
            from .approval.question import APPROVAL_ASKER

            state[APPROVAL_ASKER] = asker
        return state

    @hookimpl
    def build_prompt(self, message: Any, session_id: str, state: dict[str, Any]) -> Any:
        text = str(get_field(message, "content") or "")
        context = state.get("context") or ""
        if context:
            text = f"[{context}] {text}"
        from .channels.attachments import prompt_media

        media = [found for item in get_field(message, "media") or ()
                 if (found := prompt_media(item)) is not None]
        return [text, *media] if media else text

    @hookimpl
    def run_model_stream(self, prompt: Any, session_id: str, state: dict[str, Any]) -> Any:
        return self.get_agent().run_stream(prompt, session_id, state, model=state.get("model"))

    @hookimpl
    def render_outbound(self, message: Any, session_id: str, state: dict[str, Any],
                        model_output: str) -> list[dict[str, Any]]:
        from .channels.envelopes import with_reply_context

        channel = get_field(message, "channel") or "default"
        return [with_reply_context({
            "session_id": session_id,
            "channel": channel,
            "chat_id": get_field(message, "chat_id") or "default",
            "content": model_output,
            "output_channel": get_field(message, "output_channel") or channel,
            "kind": get_field(message, "kind") or "normal",
        }, message)]

    @hookimpl
    async def dispatch_outbound(self, message: Any) -> bool:
        router = self.framework.router
        if router is None:
            return False
        return bool(await router.dispatch(message))

    # -- resources -----------------------------------------------------------------------

    @hookimpl
    def onboard_config(self, current_config: dict[str, Any]) -> dict[str, Any]:
        """Default model settings for a config file that does not set them."""
        return {} if current_config.get("model") else {"model": self.get_settings().model_spec}

    @hookimpl
    def provide_model_options(self, session_id: str, workspace: Any) -> ModelOptions | None:
        settings = self.get_settings()
        if not settings.models:
            return None
        # The model turns actually use is current (offline when only fallbacks are set).
        models = list(dict.fromkeys([settings.model_spec, *settings.models]))
        return ModelOptions([ModelChoice(spec) for spec in models],
                            current_model=settings.model_spec)

    @hookimpl
    def provide_environment(self, session_id: str, workspace: Any) -> LocalEnvironment:
        from .host.environment import LocalEnvironment

        return LocalEnvironment(workspace, processes=self.processes, sandbox=self.sandbox_policy())

    def sandbox_policy(self) -> SandboxPolicy:
        """The configured confinement of tool processes (hiding this home and its store),
        made once per set of settings: every session's environment shares it."""
        settings = self.get_settings()
        if self._sandbox is None or self._sandbox[0] is not settings:
            from .host.sandbox import SandboxPolicy

            self._sandbox = (settings, SandboxPolicy.from_settings(settings))
        return self._sandbox[1]

    @hookimpl
    def system_prompt(self, prompt: Any, state: dict[str, Any]) -> str:
        """The default prompt, the date, the `AGENTS.md` files that may be sent (see
        `hookline.builtins.host.instructions`: read off the event loop, cached), and the
        turn's own system prompt (`--system`) last."""
        parts = [DEFAULT_SYSTEM_PROMPT, f"Today is {datetime.now():%Y-%m-%d}."]
        instructions = self.instructions.text(self._workspace_of(state))
        if instructions is not None:
            parts.append(instructions)
        if state.get(TURN_SYSTEM):
            parts.append(str(state[TURN_SYSTEM]))
        return "\n\n".join(parts)

    @property
    def instructions(self) -> WorkspaceInstructions:
        if self._instructions is None:
            from .host.instructions import WorkspaceInstructions

            self._instructions = WorkspaceInstructions()
        return self._instructions

    def _workspace_of(self, state: dict[str, Any]) -> Path:
        return Path(state.get(RUNTIME_WORKSPACE) or self.framework.workspace)

    async def _say_what_commands_made(self, event: RunFinished) -> None:
        """After each run: the repositories its commands made, said while the user may
        still be there (see `LocalEnvironment.say_what_commands_made`), and the sandboxes
        of approved background commands that ended closed."""
        from .host import LocalEnvironment

        environment = event.state.get(RUNTIME_ENVIRONMENT)
        if isinstance(environment, LocalEnvironment):
            await environment.say_what_commands_made()
            await environment.end_finished_escalations()

    async def _refresh_instructions(self, event: StepStarted) -> None:
        """Before each model call: the `AGENTS.md` files checked (read in a worker thread
        when changed) for the synchronous `system_prompt` that comes next."""
        await self.instructions.refresh(self._workspace_of(event.state))

    @hookimpl
    async def provide_tape_store(self) -> AsyncIterator[Any]:
        """The tape store of the settings, once the hookline home is private (0700)."""
        # The home, opening (schema, WAL) and closing (checkpoint) touch the disk: threads.
        import anyio
        import anyio.to_thread

        from .privacy.files import secure_home
        from .store.url import is_postgres_url

        settings = self.get_settings()
        await anyio.to_thread.run_sync(secure_home, settings.home)
        path = settings.tape_store
        assert path is not None  # Settings.__post_init__ fills in the default
        if is_postgres_url(path):  # the driver is imported only then
            from .store.postgres.store import open_postgres_store

            async with open_postgres_store(str(path)) as shared:
                yield shared
            return
        from .store.sqlite.store import SQLiteTapeStore

        store = await anyio.to_thread.run_sync(SQLiteTapeStore, path)
        try:
            yield store
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(store.close)

    @hookimpl
    def provide_lifespan(self) -> Any:
        """The background processes' lifespan, with the process records in the hookline
        home and a periodic sweep that also closes idle environments. A weakened sandbox
        or environment policy is warned about here, at every start."""
        home = self._home()
        from .config import SettingsError

        # A bad config file is reported by whatever needs the settings, with the fix.
        with contextlib.suppress(SettingsError):
            self.sandbox_policy().warn()
        lifespan = _home_secured(home, self.processes.lifespan(
            records=home / PROCESS_RECORDS, sweep=self.framework.close_idle_environments,
            sweep_seconds=self.sweep_seconds))
        with contextlib.suppress(SettingsError):
            servers = self.mcp_servers()
            if servers is not None:  # inside the processes' scope: ended before it
                lifespan = _nested(lifespan, servers.lifespan())
        if self._telemetry_wanted():  # docs/observability.md; nothing imported otherwise
            from .telemetry.scope import observed_lifespan

            return observed_lifespan(lifespan, self.framework, self.get_settings(),
                                     self.get_agent().bus)
        return lifespan

    def _telemetry_wanted(self) -> bool:
        """The `otel` setting, or telemetry installed already (`hookline run --trace`)."""
        from .config import SettingsError
        from .telemetry.active import installed

        if installed(self.framework) is not None:
            return True
        try:
            return bool(self.get_settings().otel)
        except SettingsError:
            return False

    def mcp_servers(self) -> McpServers | None:
        """The configured MCP servers (`[mcp_servers]`), or None when there are none:
        the MCP modules and SDK are imported only then."""
        settings = self.get_settings()
        if self._mcp is None or self._mcp[0] is not settings:
            servers = None
            if settings.extra.get("mcp_servers"):  # mcp.config.CONFIG_TABLE, not imported
                from .agent.steering import steer
                from .mcp.manager import McpServers

                servers = McpServers.configured(settings, lambda: str(self.framework.workspace),
                                                self.processes, self.sandbox_policy,
                                                partial(steer, self.framework))
            self._mcp = (settings, servers)
        return self._mcp[1]

    async def _prepare_mcp(self) -> None:
        servers = self.mcp_servers()
        if servers is not None and self.framework.in_scope:
            await servers.prepare()

    @hookimpl
    def build_tape_context(self) -> TapeContext:
        return TapeContext(window=2 * CONTEXT_WINDOW)

    @hookimpl
    def provide_tools(self) -> list[Tool]:
        """The builtin tools (made once for the current background processes: every run
        asks), then the MCP servers' tools as they are now."""
        processes = self.processes
        if self._own_tools is None or self._own_tools[0] is not processes:
            from .host.tools import builtin_tools
            from .tape.tools import spill_tools, tape_tools

            tools = (*builtin_tools(processes), *tape_tools(), *spill_tools())
            self._own_tools = (processes, tools)
        servers = self.mcp_servers()
        mcp_tools = servers.tools() if servers is not None else []
        return [*self._own_tools[1], *mcp_tools]

    @hookimpl
    def provide_steering_inbox(self) -> InMemorySteeringInbox:
        from .agent.steering import InMemorySteeringInbox

        return InMemorySteeringInbox()

    @hookimpl
    def provide_tape_sidecar(self) -> SpillSidecar:
        """The spill sidecar: where oversized tool results go (see `after_tool_call`)."""
        from .tape.spill import SpillSidecar

        return SpillSidecar()

    # -- interception --------------------------------------------------------------------

    @hookimpl
    async def before_tool_call(self, call: ToolCall, state: dict[str, Any]
                               ) -> ToolCallDecision | None:
        """The approval gate: the rules and the turn's policy run the call, deny it, or ask
        the turn's asker (docs/approvals.md). Registered first, it runs after every other
        plugin's `before_tool_call`, so theirs decide first."""
        return await self.approvals.before_tool_call(call, state)

    @property
    def approvals(self) -> ApprovalGate:
        if self._approvals is None:
            from .approval.gate import ApprovalGate

            self._approvals = ApprovalGate(self.get_settings,
                                           lambda: str(self.framework.workspace))
        return self._approvals

    @hookimpl(trylast=True)
    async def after_tool_call(
        self, call: ToolCall, result: ToolCallResult, state: dict[str, Any]
    ) -> None:
        """Move a model-facing result longer than the spill limit to the spill sidecar
        (after the approval gate noted a failed command, for an escalation to show).

        Trylast and registered first: it runs after every normal and tryfirst
        implementation and before the trylast ones of plugins registered later.
        """
        from .tape.spill import spill_result

        self.approvals.note_result(call, result, state)
        await spill_result(call, result, state)

    # -- channels ------------------------------------------------------------------------

    @hookimpl
    def provide_channels(self, message_handler: MessageHandler) -> list[Channel]:
        """The builtin channels; constructing them must stay cheap and side-effect free
        (onboarding calls this only to list names)."""
        from .channels.cli.channel import CliChannel

        channels: list[Channel] = [CliChannel(message_handler)]

        # -- http channel (`hookline gateway`) -------------------------------------------
        from .channels.http.channel import HttpChannel
        from .tape.requests import RequestRecords

        # Settings are read when the channel starts, not here.
        records = RequestRecords(lambda session_id: self.tape_for(session_id, {}))
        channels.append(HttpChannel(message_handler, settings=self.get_settings,
                                    health=self.store_health, scrub=self.scrub_text,
                                    records=records))
        return channels

    async def store_health(self) -> str | None:
        """Why the running tape store cannot record turns now, or None when it can.

        A sync store's check runs in a worker thread that the caller's deadline (the http
        channel's 2 s) may leave behind; until it ends no other one starts, so a stuck
        store holds one thread, not one per second."""
        import anyio.to_thread

        store = self.framework.get_tape_store()
        probe = getattr(store, "check_writable", None)
        if probe is None:
            return None
        try:
            if inspect.iscoroutinefunction(probe):
                await probe()
            else:  # a sync store does disk I/O: never on the event loop thread
                if self._store_probe is not None and not self._store_probe.is_set():
                    return "the tape store cannot write: its last check has not finished"
                ended = self._store_probe = threading.Event()
                await anyio.to_thread.run_sync(_run_then_set, probe, ended,
                                               abandon_on_cancel=True)
        except Exception as exc:
            return f"the tape store cannot write: {exc}"
        return None

    def scrub_text(self, text: str) -> str:
        """`text` for a gateway's client: without credentials in URLs, with workspace paths
        relative to it, the hookline home and the user's home folder named, the provider's
        endpoint (`api_base`, an address of the operator's) as `<api_base>`, and its key
        (the configured one, any `*API_KEY` variable's: a provider's error may quote it)
        as `<secret>`."""
        import os

        from .privacy import HOME_ENV, redact_credentials, redact_paths, replace_values

        settings = self._settings
        base = (settings.api_base if settings else None) or ""
        keys = [value for name, value in os.environ.items() if name.upper().endswith("API_KEY")]
        text = replace_values(text, [
            *((key, "<secret>") for key in (settings.resolved_api_key() if settings else None,
                                           *keys)),
            (base.rstrip("/"), "<api_base>"),  # as written, and as an error masks it
            (redact_credentials(base).rstrip("/"), "<api_base>")])
        others = [(str(self._home()), f"${HOME_ENV}"), (str(Path.home()), "~")]
        return redact_paths(redact_credentials(text), self.framework.workspace, others)

    def _home(self) -> Path:
        """The hookline home: the settings' when read, else the default (no config read)."""
        if self._settings is not None:
            return self._settings.home
        from .config import default_home

        return default_home()

    @hookimpl
    async def on_error(self, stage: str, error: Exception, message: Any) -> None:
        """Tell the conversation's channel that something failed (when there is one)."""
        if message is None:
            return
        from .channels.cli.channel import CliChannel
        from .channels.envelopes import error_outbound
        from .privacy.redact import redact_credentials

        # The terminal's user is the operator: the endpoint and paths are theirs to see.
        own = get_field(message, "channel") == CliChannel.name
        outbound = error_outbound(stage, error, message,
                                  redact_credentials if own else self.scrub_text)
        await self.framework.runtime.call_many("dispatch_outbound", message=outbound)


async def _home_secured(home: Path, lifespan: AsyncIterator[None]) -> AsyncIterator[None]:
    """`lifespan` once the hookline home is private and writable: the process records go
    there, before the tape store secures it (a home that cannot be used is one clear error,
    not a log line and then the store's)."""
    import anyio.to_thread

    from .privacy.files import secure_home

    await anyio.to_thread.run_sync(secure_home, home)
    async with contextlib.asynccontextmanager(lambda: lifespan)():
        yield


async def _nested(outer: AsyncIterator[None], inner: AsyncIterator[None]
                  ) -> AsyncIterator[None]:
    """One lifespan entering `outer`, then `inner`; leaving them in reverse order."""
    async with contextlib.asynccontextmanager(lambda: outer)(), \
            contextlib.asynccontextmanager(lambda: inner)():
        yield


def _run_then_set(function: Any, ended: threading.Event) -> None:
    try:
        function()
    finally:
        ended.set()
