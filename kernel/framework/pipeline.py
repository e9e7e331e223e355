"""The turn pipeline: one inbound envelope in, a ``TurnResult`` out, every stage a hook.

resolve_session -> build_state (provide_environment, load_state) -> build_prompt ->
model stage (run_model or run_model_stream) with save_state in its ``finally`` ->
render_outbound -> dispatch_outbound for each outbound. Any ``Exception`` is reported
to ``on_error`` with stage ``turn`` and re-raised.
"""

from __future__ import annotations

import inspect
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any, Protocol

from .._util import get_logger
from ..envelope import default_session_id, envelope_content, get_field, set_field
from ..errors import ErrorKind, HooklineError
from ..prompt import to_content, to_legacy_prompt
from ..streaming import AsyncStreamEvents, StreamEvent, TextAnswerStream
from ..turn import RUNTIME_ENVIRONMENT, RUNTIME_STEERING_INBOX, RUNTIME_WORKSPACE, TurnResult

__all__ = ["TurnHost", "TurnPipeline"]

if TYPE_CHECKING:
    from pathlib import Path

    from .._dispatch import HookImpl, Registry
    from ..channels import ChannelRouter
    from ..environment import Environment
    from .envcache import EnvironmentCache
    from .model_stage import HookRuntime


class TurnHost(Protocol):
    """What the turn stages need from their host (the ``Framework``): the workspace, the
    running scope's resources and the bound router. Nothing else of the host is reached."""

    workspace: Path
    router: ChannelRouter | None
    environments: EnvironmentCache

    def get_steering_inbox(self) -> Any: ...

    def cached_environment(self, session_id: str, default: Any = None) -> Any: ...

    async def get_environment(self, session_id: str) -> Environment | None: ...

_UNCACHED = object()


def blame(registry: Registry, error: BaseException) -> HookImpl | None:
    """The registered implementation whose code raised `error` (the innermost one in its
    traceback), or None when no plugin's function is on it. Only failures pay for this."""
    owners: dict[Any, HookImpl] = {}
    for hook in registry.hook_names():
        for impl in registry.hook_impls(hook):
            function = inspect.unwrap(getattr(impl.function, "__func__", impl.function))
            code = getattr(function, "__code__", None)
            if code is not None:
                owners.setdefault(code, impl)
    found: HookImpl | None = None
    trace = error.__traceback__
    while trace is not None:
        found = owners.get(trace.tb_frame.f_code, found)
        trace = trace.tb_next
    return found


class TurnPipeline:
    """The turn stages of a framework; ``Framework`` exposes them under the same names."""

    def __init__(self, runtime: HookRuntime, registry: Registry, host: TurnHost) -> None:
        self.runtime = runtime
        self.registry = registry
        self.host = host

    async def process_inbound(self, inbound: Any, stream_output: bool = False) -> TurnResult:
        runtime = self.runtime
        try:
            # Each stage's dispatch is awaited here and its result finished by the same
            # sync step its public method uses: every turn awaits this one coroutine, not
            # one per stage.
            impl, value = await runtime.call_first_each("resolve_session", message=inbound)
            session_id = self._session_id(impl, value, inbound)
            if inbound.__class__ is dict:  # the common case, without the ABC checks
                inbound["session_id"] = session_id
            elif isinstance(inbound, MutableMapping):
                set_field(inbound, "session_id", session_id)
            # The turn holds its session's environment: the cache never evicts it meanwhile.
            environments = self.host.environments
            environments.take(session_id)
            try:
                state = self._cached_runtime_state(session_id)
                if state is None:
                    state = await self._new_runtime_state(session_id)
                self._merge_state(state, await runtime.call_many(
                    "load_state", message=inbound, session_id=session_id))
                prompt = _prompt(await runtime.call_first_each(
                    "build_prompt", message=inbound, session_id=session_id, state=state),
                    inbound)
                model_output = ""
                try:
                    if stream_output:
                        model_output = await self.run_model_stage(
                            inbound, prompt, session_id, state, stream_output)
                    else:
                        output = await runtime.run_model(prompt, session_id, state)
                        model_output = (await self._no_answer(inbound, prompt)
                                        if output is None else output)
                finally:
                    await runtime.call_many(
                        "save_state", session_id=session_id, state=state, message=inbound,
                        model_output=model_output,
                    )
                outbounds = _outbounds(await runtime.call_many(
                    "render_outbound", message=inbound, session_id=session_id, state=state,
                    model_output=model_output), inbound, session_id, model_output)
                for outbound in outbounds:
                    await runtime.call_many("dispatch_outbound", message=outbound)
                return TurnResult(session_id, prompt, model_output, outbounds, state)
            finally:
                environments.let_go(session_id)
        except Exception as exc:
            culprit = blame(self.registry, exc)
            where = (f" plugin={culprit.plugin_name} hook={culprit.hook_name} "
                     f"function={culprit.function_name} ({culprit.location})"
                     if culprit is not None else "")
            get_logger(__name__).error("turn.failed%s error=%s: %s", where, type(exc).__name__, exc,
                         exc_info=exc)
            await runtime.notify_error("turn", exc, inbound)
            raise

    async def resolve_session(self, message: Any) -> str:
        """First non-None result as text; a falsy one falls back to the default id.

        A result that is not a str is turned into one, as the reference does, with a
        warning naming the plugin (a list would otherwise become a session silently)."""
        impl, value = await self.runtime.call_first_each("resolve_session", message=message)
        return self._session_id(impl, value, message)

    @staticmethod
    def _session_id(impl: HookImpl | None, value: Any, message: Any) -> str:
        if impl is not None and value and not isinstance(value, str):
            get_logger(__name__).warning(
                "hook.resolve_session_not_text %s returned %s; its str() %r is the session id "
                "(return a str)", impl.describe(), type(value).__name__, str(value))
        return str(value) if value else default_session_id(message)

    async def build_state(self, message: Any, session_id: str) -> dict[str, Any]:
        """Fresh turn state: runtime keys, then load_state fragments, highest priority last."""
        state = self._cached_runtime_state(session_id)
        if state is None:
            state = await self._new_runtime_state(session_id)
        self._merge_state(state, await self.runtime.call_many(
            "load_state", message=message, session_id=session_id))
        return state

    async def _new_runtime_state(self, session_id: str) -> dict[str, Any]:
        """The runtime keys, once the providers made the session's environment."""
        return self._runtime_keys(await self.host.get_environment(session_id))

    def _cached_runtime_state(self, session_id: str) -> dict[str, Any] | None:
        """The runtime keys of a fresh state, or None while the session's environment is
        not cached yet (the providers are then asked for it)."""
        environment = self.host.cached_environment(session_id, _UNCACHED)
        return None if environment is _UNCACHED else self._runtime_keys(environment)

    def _runtime_keys(self, environment: Environment | None) -> dict[str, Any]:
        host = self.host
        state: dict[str, Any] = {
            RUNTIME_WORKSPACE: str(host.workspace),
            RUNTIME_STEERING_INBOX: host.get_steering_inbox(),
        }
        if environment is not None:
            state[RUNTIME_ENVIRONMENT] = environment
        return state

    def _merge_state(self, state: dict[str, Any], fragments: list[Any]) -> None:
        for index in reversed(range(len(fragments))):
            fragment = fragments[index]
            if isinstance(fragment, dict):
                state.update(fragment)
            elif fragment is not None:
                _ignored_state(self.registry, index, fragment)

    async def build_prompt(self, message: Any, session_id: str, state: dict[str, Any]) -> list[Any]:
        """The selected prompt as content; a falsy selection falls back to the envelope text."""
        return _prompt(await self.runtime.call_first_each(
            "build_prompt", message=message, session_id=session_id, state=state), message)

    # -- model stage -------------------------------------------------------------------

    async def run_model_stage(
        self, inbound: Any, prompt: list[Any], session_id: str, state: dict[str, Any],
        stream_output: bool,
    ) -> str:
        """Run the model hooks and return the model output text.

        No answer (no model plugin, or a None result) is reported to ``on_error`` with
        stage ``run_model`` and the turn answers with the prompt's text.
        """
        output: str | None
        if not stream_output:
            output = await self.runtime.run_model(prompt, session_id, state)
        else:
            stream = await self.runtime.run_model_stream(prompt, session_id, state)
            output = None if stream is None else await self._consume(inbound, stream)
            if isinstance(stream, TextAnswerStream) and not stream.answered:
                output = None
        return await self._no_answer(inbound, prompt) if output is None else output

    async def _no_answer(self, inbound: Any, prompt: list[Any]) -> str:
        await self.runtime.notify_error(
            "run_model", RuntimeError("no model skill returned output"), inbound
        )
        legacy = to_legacy_prompt(prompt)
        return legacy if isinstance(legacy, str) else envelope_content(inbound)

    async def _consume(self, inbound: Any, stream: AsyncStreamEvents) -> str:
        """Collect text deltas through the router's wrapper; report error events to on_error."""
        router = self.host.router
        events: Any = stream
        if router is not None:
            events = router.wrap_stream(inbound, stream)
        parts: list[str] = []
        try:
            async for event in events:
                if event.kind == "text":
                    parts.append(str(event.data.get("delta", "")))
                elif event.kind == "error":
                    await self.runtime.notify_error("run_model", _stream_error(event), inbound)
        finally:
            await stream.aclose()
        return "".join(parts)

    # -- outbound ----------------------------------------------------------------------

    async def render_outbound(
        self, message: Any, session_id: str, state: dict[str, Any], model_output: str
    ) -> list[Any]:
        """Every batch concatenated in priority order; empty means the default outbound."""
        return _outbounds(await self.runtime.call_many(
            "render_outbound", message=message, session_id=session_id, state=state,
            model_output=model_output), message, session_id, model_output)


def _prompt(answer: tuple[HookImpl | None, Any], message: Any) -> list[Any]:
    """The answer of build_prompt as content (a falsy one: the envelope's text); one that
    cannot be also names the plugin that gave it, after the reference's words."""
    impl, value = answer
    try:
        return to_content(value if value else envelope_content(message))
    except HooklineError as exc:
        if impl is None or not value:
            raise
        raise HooklineError(exc.kind, f"{exc.message}; {impl.describe()} returned "
                                      f"{type(value).__name__}", exc.details) from None


def _outbounds(batches: list[Any], message: Any, session_id: str, model_output: str
               ) -> list[Any]:
    outbounds: list[Any] = []
    for batch in batches:
        if batch is None:
            continue
        if isinstance(batch, list | tuple):
            outbounds.extend(batch)
        else:
            outbounds.append(batch)
    if outbounds:
        return outbounds
    fallback: dict[str, Any] = {"content": model_output, "session_id": session_id}
    for key in ("channel", "chat_id"):
        value = get_field(message, key)
        if value is not None:
            fallback[key] = value
    return [fallback]


def _ignored_state(registry: Registry, index: int, fragment: Any) -> None:
    """Warn about a load_state result that is not a dict: it is ignored, as the reference
    ignores it, but never silently. Results come in the implementations' order."""
    impl = registry.hook_impls("load_state")[index]
    get_logger(__name__).warning(
        "hook.load_state_ignored %s returned %s, which is ignored (return a dict or None)",
        impl.describe(), type(fragment).__name__)


def _stream_error(event: StreamEvent) -> HooklineError:
    data = event.data
    try:
        kind = ErrorKind(data.get("kind") or "unknown")
    except ValueError:
        kind = ErrorKind.unknown
    return HooklineError(kind, str(data.get("message", "")), data.get("details"))
