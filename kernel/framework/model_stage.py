"""The model stage and the error observer over the dispatch runtime: hookline's
``HookRuntime``.

The framework layer: which of ``run_model`` / ``run_model_stream`` answers a turn (chosen
per registry generation and cached), how a text answer becomes a stream and a stream a
text, and ``notify_error`` for ``on_error``. Host code can run the model stage alone
through it, without a ``Framework``. The hooks themselves are declared in ``hooks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

from .._dispatch import HookRuntime as _CoreRuntime

if TYPE_CHECKING:
    from ..prompt import LegacyPrompt, UserContent
    from ..streaming import AsyncStreamEvents
    from ..turn import TurnState

__all__ = ["RUN_MODEL", "RUN_MODEL_STREAM", "HookRuntime"]

RUN_MODEL: Final = "run_model"
RUN_MODEL_STREAM: Final = "run_model_stream"


class HookRuntime(_CoreRuntime):
    """The dispatch runtime, plus the contract's error observer hook, ``on_error``, and
    the model stage (``run_model`` / ``run_model_stream``), which host code can run alone."""

    _model_choice: tuple[int, bool, str | None] | None = None

    def model_hook(self, stream_output: bool) -> str | None:
        """Which model hook answers on this path, or None when no plugin offers one.

        Plugins are walked newest first; the first one that implements either hook (with a
        marked implementation) decides; a plugin implementing both uses the kind the path
        prefers (``run_model_stream`` when streaming). Cached until plugins change.
        """
        registry = self.registry
        cached = self._model_choice
        if cached is not None and cached[0] == registry.generation and cached[1] == stream_output:
            return cached[2]
        preferred = (RUN_MODEL, RUN_MODEL_STREAM)
        if stream_output:
            preferred = (RUN_MODEL_STREAM, RUN_MODEL)
        choice = None
        for name, _ in reversed(registry.list_name_plugin()):
            hooks = registry.plugin_hooks(name)
            choice = next((hook for hook in preferred if hook in hooks), None)
            if choice:
                break
        self._model_choice = (registry.generation, stream_output, choice)
        return choice

    async def run_model(
        self, prompt: UserContent | list[UserContent] | LegacyPrompt, session_id: str,
        state: TurnState,
    ) -> str | None:
        """The model's text for `prompt`, or None when no model plugin answers.

        The chosen hook (see `model_hook`) gets the legacy prompt form; its first non-None
        result over all implementations is the answer. When the newest model plugin only
        streams, its text deltas are collected. A result of the wrong type is a TypeError
        naming the plugin and function that returned it.
        """
        kwargs = _model_kwargs(prompt, session_id, state)
        hook = self.model_hook(False)
        if hook == RUN_MODEL:  # _model_text written out: one coroutine less a turn
            impl, value = await self.call_first_each(RUN_MODEL, **kwargs)
            if impl is not None and not isinstance(value, str):
                from ..errors import bad_return

                raise bad_return(impl, "str or None", value)
            return value  # type: ignore[no-any-return]  # a str, or None when nobody answered
        if hook == RUN_MODEL_STREAM:
            stream = await self._model_stream(kwargs)
            if stream is not None:
                async with stream:
                    return "".join([str(event.data.get("delta", ""))
                                    async for event in stream if event.kind == "text"])
        return None

    async def run_model_stream(
        self, prompt: UserContent | list[UserContent] | LegacyPrompt, session_id: str,
        state: TurnState,
    ) -> AsyncStreamEvents | None:
        """The model's answer to `prompt` as a stream, or None when no model plugin answers.

        When the newest model plugin only has ``run_model``, its answer is offered as a
        stream of one ``text`` event, dispatched when the stream is first iterated (a None
        answer gives an empty stream whose ``answered`` is False). A result of the wrong
        type is a TypeError naming the plugin and function that returned it.
        """
        from ..streaming import TextAnswerStream

        kwargs = _model_kwargs(prompt, session_id, state)
        hook = self.model_hook(True)
        if hook == RUN_MODEL_STREAM:
            return await self._model_stream(kwargs)
        if hook == RUN_MODEL:
            return TextAnswerStream(lambda: self._model_text(kwargs))
        return None

    async def _model_text(self, kwargs: dict[str, Any]) -> str | None:
        impl, value = await self.call_first_each(RUN_MODEL, **kwargs)
        if impl is not None and not isinstance(value, str):
            from ..errors import bad_return  # only when it fails: errors loads dataclasses

            raise bad_return(impl, "str or None", value)
        return value  # type: ignore[no-any-return]  # a str, or None when nobody answered

    async def _model_stream(self, kwargs: dict[str, Any]) -> AsyncStreamEvents | None:
        from ..streaming import AsyncStreamEvents

        impl, value = await self.call_first_each(RUN_MODEL_STREAM, **kwargs)
        if impl is not None and not isinstance(value, AsyncStreamEvents):
            from ..errors import bad_return

            raise bad_return(impl, "AsyncStreamEvents or None", value,
                             "; wrap an async generator in AsyncStreamEvents(...)")
        return value  # type: ignore[no-any-return]  # a stream, or None when nobody answered

    async def notify_error(self, stage: str, error: BaseException, message: Any = None) -> None:
        """Call every ``on_error`` observer; an observer's exception is logged as
        ``hook.on_error_failed stage=<stage> adapter=<plugin>`` and the next one runs."""
        await self.notify("on_error", f"stage={stage}", stage=stage, error=error,
                          message=message)

    def notify_error_sync(self, stage: str, error: BaseException, message: Any = None) -> None:
        """Sync ``notify_error``: awaitable results are skipped with a warning."""
        self.notify_sync("on_error", f"stage={stage}", stage=stage, error=error,
                         message=message)


def _model_kwargs(
    prompt: UserContent | list[UserContent] | LegacyPrompt, session_id: str, state: TurnState
) -> dict[str, Any]:
    # The turn's prompt is text parts only, as a rule (most often one): joined as
    # to_legacy_prompt would.
    if prompt.__class__ is list and len(prompt) == 1 and prompt[0].__class__ is str:
        legacy: LegacyPrompt = cast("list[str]", prompt)[0]
    elif isinstance(prompt, list) and all(item.__class__ is str for item in prompt):
        legacy = "\n".join(cast("list[str]", prompt))
    else:
        from ..prompt import to_content, to_legacy_prompt

        legacy = to_legacy_prompt(to_content(prompt))
    return {"prompt": legacy, "session_id": session_id, "state": state}
