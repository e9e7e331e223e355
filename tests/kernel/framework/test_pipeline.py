"""The turn pipeline end to end: ``Framework.process_inbound`` with recording plugins, stage
by stage from resolve_session to dispatch_outbound (docs/pipeline.md, and the
hookline choices listed in the module docstrings of kernel/framework/pipeline.py); the
model stage is in test_pipeline_model.py, failures in test_pipeline_failures.py."""

from __future__ import annotations

import types
from typing import Any

import pytest
import republic
from pipeline_support import PNG_DATA_URL, Recorder, TextModel, errors
from recorders import Answering, AsyncAnswering, FakeEnvironment

from hookline.kernel import hookimpl
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.framework.core import Framework
from hookline.kernel.turn import TurnResult

# -- stage order and results ----------------------------------------------------------------


@pytest.mark.anyio
async def test_stage_order_and_turn_result(framework: Framework) -> None:
    log: list[Any] = []
    recorder = Recorder(log, {"resolve_session": "s1", "load_state": {"k": "v"},
                              "build_prompt": "the prompt"})

    class Env:
        @hookimpl
        def provide_environment(self, session_id, workspace):
            log.append("provide_environment")

    framework.registry.register(recorder, "recorder")
    framework.registry.register(Env(), "env")
    framework.registry.register(TextModel("the answer", log), "model")
    inbound = {"content": "hello", "channel": "cli", "chat_id": "1"}

    async with framework.running():
        result = await framework.process_inbound(inbound)

    assert log == [
        "resolve_session", "provide_environment", "load_state", "build_prompt", "run_model",
        "save_state", "render_outbound", "dispatch_outbound",
    ]
    assert isinstance(result, TurnResult)
    assert result.session_id == "s1"
    assert result.prompt == ["the prompt"]
    assert result.model_output == "the answer"
    assert result.outbounds == [
        {"content": "the answer", "session_id": "s1", "channel": "cli", "chat_id": "1"}
    ]
    assert result.state["k"] == "v"
    saved = recorder.calls["save_state"][0]
    assert saved == {"session_id": "s1", "state": result.state, "message": inbound,
                     "model_output": "the answer"}
    assert saved["state"] is result.state
    assert recorder.calls["build_prompt"][0]["state"] is result.state
    assert recorder.calls["render_outbound"][0]["model_output"] == "the answer"
    assert recorder.calls["dispatch_outbound"] == [{"message": result.outbounds[0]}]
    assert "on_error" not in recorder.calls


# -- resolve_session -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_resolve_session_first_result_wins(framework: Framework) -> None:
    low = Answering("resolve_session", "low")
    framework.registry.register(low, "low")
    framework.registry.register(Answering("resolve_session", None), "abstains")
    framework.registry.register(Answering("resolve_session", "high"), "high")
    result = await framework.process_inbound({"content": "x", "session_id": "envelope"})
    assert result.session_id == "high"
    assert low.calls == 0


@pytest.mark.anyio
async def test_resolve_session_result_is_converted_to_text(framework: Framework) -> None:
    framework.registry.register(Answering("resolve_session", 42), "number")
    assert (await framework.process_inbound({"content": "x"})).session_id == "42"


@pytest.mark.anyio
@pytest.mark.parametrize("falsy", ["", 0, False])
async def test_falsy_resolve_session_falls_back_and_hides_lower_ones(
    framework: Framework, falsy: Any
) -> None:
    low = Answering("resolve_session", "low")
    framework.registry.register(low, "low")
    framework.registry.register(Answering("resolve_session", falsy), "falsy")
    inbound = {"content": "x", "channel": "tg", "chat_id": 9}
    assert (await framework.process_inbound(inbound)).session_id == "tg:9"
    assert low.calls == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("inbound", "expected"),
    [
        ({"content": "x", "session_id": "given", "channel": "c"}, "given"),
        ({"content": "x", "channel": "cli"}, "cli:default"),
        ({"content": "x", "chat_id": "42"}, "default:42"),
        ({"content": "x"}, "default:default"),
        ({"content": "x", "session_id": "", "channel": "cli", "chat_id": "7"}, "cli:7"),
        ({"content": "x", "session_id": "   ", "channel": "cli"}, "cli:default"),
        ({"content": "x", "session_id": None, "channel": None, "chat_id": "7"}, "default:7"),
        (types.SimpleNamespace(content="x", session_id="obj"), "obj"),
        (types.SimpleNamespace(content="x", session_id=" ", channel="web"), "web:default"),
        (types.SimpleNamespace(content="x"), "default:default"),
        (types.SimpleNamespace(), "default:default"),
    ],
)
async def test_default_session_id(framework: Framework, inbound: Any, expected: str) -> None:
    result = await framework.process_inbound(inbound)
    assert result.session_id == expected


@pytest.mark.anyio
async def test_dict_inbound_gets_the_resolved_session_id(framework: Framework) -> None:
    framework.registry.register(Answering("resolve_session", "resolved"), "resolver")
    inbound = {"content": "x", "session_id": "stale"}
    await framework.process_inbound(inbound)
    assert inbound["session_id"] == "resolved"

    blank = {"content": "x", "session_id": " ", "channel": "cli"}
    framework.registry.unregister("resolver")
    await framework.process_inbound(blank)
    assert blank["session_id"] == "cli:default"


@pytest.mark.anyio
async def test_object_inbound_is_not_touched(framework: Framework) -> None:
    framework.registry.register(Answering("resolve_session", "resolved"), "resolver")
    inbound = types.SimpleNamespace(content="x", session_id="stale")
    result = await framework.process_inbound(inbound)
    assert result.session_id == "resolved"
    assert inbound.session_id == "stale"
    bare = types.SimpleNamespace(content="x")
    await framework.process_inbound(bare)
    assert not hasattr(bare, "session_id")


# -- load_state ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_load_state_merges_fragments_higher_priority_wins(framework: Framework) -> None:
    seen: list[Any] = []
    framework.registry.register(Answering("load_state", {"a": "low", "b": "low"}, seen), "low")
    framework.registry.register(Answering("load_state", None), "none")
    framework.registry.register(Answering("load_state", ["not", "a", "dict"]), "list")
    framework.registry.register(Answering("load_state", {"b": "mid", "c": "mid"}), "mid")

    class High:
        @hookimpl(tryfirst=True)
        async def load_state(self, message, session_id):
            return {"c": "high", "_runtime_workspace": "overridden"}

    framework.registry.register(High(), "high")
    inbound = {"content": "x", "session_id": "s"}
    result = await framework.process_inbound(inbound)
    state = result.state
    assert state["a"] == "low"
    assert state["b"] == "mid"
    assert state["c"] == "high"
    assert state["_runtime_workspace"] == "overridden"
    assert seen == [(inbound, "s")]


@pytest.mark.anyio
async def test_runtime_keys_are_pre_seeded(framework: Framework) -> None:
    inbox = object()
    environment = FakeEnvironment()
    seen_states: list[dict[str, Any]] = []

    class Resources:
        @hookimpl
        def provide_steering_inbox(self):
            return inbox

        @hookimpl
        def provide_environment(self, session_id):
            return environment if session_id == "with-env" else None

        @hookimpl
        def build_prompt(self, state):
            seen_states.append(dict(state))

    framework.registry.register(Resources(), "resources")

    # Outside running(): no inbox, no environment key unless one exists.
    result = await framework.process_inbound({"content": "x", "session_id": "plain"})
    assert result.state == {
        "_runtime_workspace": str(framework.workspace),
        "_runtime_steering_inbox": None,
    }

    async with framework.running():
        with_env = await framework.process_inbound({"content": "x", "session_id": "with-env"})
        without = await framework.process_inbound({"content": "x", "session_id": "no-env"})
    assert with_env.state == {
        "_runtime_workspace": str(framework.workspace),
        "_runtime_steering_inbox": inbox,
        "_runtime_environment": environment,
    }
    assert "_runtime_environment" not in without.state
    assert without.state["_runtime_steering_inbox"] is inbox
    assert seen_states[1] == with_env.state


# -- build_prompt ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("falsy", ["", []])
async def test_falsy_build_prompt_falls_back_to_content(
    framework: Framework, falsy: Any
) -> None:
    low = Answering("build_prompt", "from low")
    model = TextModel("ok")
    framework.registry.register(low, "low")
    framework.registry.register(Answering("build_prompt", falsy), "falsy")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "raw content"})
    assert result.prompt == ["raw content"]
    assert model.calls[0]["prompt"] == "raw content"
    assert low.calls == 0


@pytest.mark.anyio
async def test_no_build_prompt_uses_content_or_empty(framework: Framework) -> None:
    model = TextModel("ok")
    framework.registry.register(model, "model")
    assert (await framework.process_inbound({"content": 12})).prompt == ["12"]
    assert (await framework.process_inbound(types.SimpleNamespace())).prompt == [""]
    assert [c["prompt"] for c in model.calls] == ["12", ""]


@pytest.mark.anyio
async def test_build_prompt_first_result_wins_and_text_lists_are_joined(
    framework: Framework,
) -> None:
    low = Answering("build_prompt", "low")
    model = TextModel("ok")
    framework.registry.register(low, "low")
    framework.registry.register(Answering("build_prompt", ["line one", "line two"]), "high")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "raw"})
    assert result.prompt == ["line one", "line two"]
    assert model.calls[0]["prompt"] == "line one\nline two"
    assert low.calls == 0


@pytest.mark.anyio
async def test_media_prompt_reaches_run_model_as_legacy_blocks(framework: Framework) -> None:
    image = republic.image(PNG_DATA_URL)
    model = TextModel("a picture")
    framework.registry.register(Answering("build_prompt", ["describe this", image]), "prompter")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "raw"})
    assert result.prompt == ["describe this", image]
    assert model.calls[0]["prompt"] == [
        {"type": "text", "text": "describe this"},
        {"type": "image", "media_type": "image/png", "url": PNG_DATA_URL},
    ]
    assert result.model_output == "a picture"


@pytest.mark.anyio
async def test_legacy_media_blocks_from_build_prompt_are_normalised(
    framework: Framework,
) -> None:
    model = TextModel("ok")
    blocks = [
        {"type": "text", "text": "look"},
        {"type": "image", "media_type": "image/png", "url": PNG_DATA_URL},
    ]
    framework.registry.register(Answering("build_prompt", blocks), "prompter")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "raw"})
    assert result.prompt[0] == "look"
    assert isinstance(result.prompt[1], republic.Image)
    assert model.calls[0]["prompt"] == blocks


@pytest.mark.anyio
async def test_unsupported_prompt_raises_invalid_input_without_save_state(
    framework: Framework,
) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    framework.registry.register(recorder, "recorder")
    framework.registry.register(Answering("build_prompt", {"not": "a prompt"}), "bad")
    with pytest.raises(HooklineError) as info:
        await framework.process_inbound({"content": "x"})
    assert info.value.kind == ErrorKind.invalid_input
    assert "save_state" not in log
    assert [c["stage"] for c in errors(recorder)] == ["turn"]


# -- outbound --------------------------------------------------------------------------------


class Dispatcher:
    def __init__(self, name: str, log: list[Any], answer: Any = True) -> None:
        self.name, self.log, self.answer = name, log, answer

    @hookimpl
    def dispatch_outbound(self, message):
        self.log.append((self.name, message))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.anyio
async def test_render_outbound_batches_are_concatenated_in_priority_order(
    framework: Framework,
) -> None:
    log: list[Any] = []
    framework.registry.register(AsyncAnswering("render_outbound", ["list-1", "list-2"]), "lists")
    framework.registry.register(AsyncAnswering("render_outbound", None), "none")
    framework.registry.register(AsyncAnswering("render_outbound", ("tuple-1",)), "tuples")
    framework.registry.register(AsyncAnswering("render_outbound", {"single": True}), "single")
    framework.registry.register(AsyncAnswering("render_outbound", []), "empty")
    framework.registry.register(Dispatcher("first", log), "d1")
    framework.registry.register(Dispatcher("second", log, answer=False), "d2")
    result = await framework.process_inbound({"content": "hi", "channel": "cli"})

    expected = [{"single": True}, "tuple-1", "list-1", "list-2"]
    assert result.outbounds == expected
    # Every dispatch implementation sees every outbound, in outbound order.
    assert log == [
        (name, outbound) for outbound in expected for name in ("second", "first")
    ]


@pytest.mark.anyio
async def test_render_outbound_receives_the_turn(framework: Framework) -> None:
    log: list[Any] = []
    recorder = Recorder(log, {"render_outbound": lambda **kw: [kw["model_output"].upper()]})
    framework.registry.register(recorder, "recorder")
    framework.registry.register(TextModel("answer"), "model")
    inbound = {"content": "hi", "session_id": "s"}
    result = await framework.process_inbound(inbound)
    call = recorder.calls["render_outbound"][0]
    assert call == {"message": inbound, "session_id": "s", "state": result.state,
                    "model_output": "answer"}
    assert result.outbounds == ["ANSWER"]
    assert recorder.calls["dispatch_outbound"] == [{"message": "ANSWER"}]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("inbound", "extra"),
    [
        ({"content": "hi"}, {}),
        ({"content": "hi", "channel": "cli", "chat_id": 0}, {"channel": "cli", "chat_id": 0}),
        ({"content": "hi", "channel": None, "chat_id": "7"}, {"chat_id": "7"}),
        (types.SimpleNamespace(content="hi", channel="web"), {"channel": "web"}),
        (types.SimpleNamespace(content="hi", channel="web", chat_id=None,
                               output_channel="elsewhere"), {"channel": "web"}),
        (types.SimpleNamespace(content="hi"), {}),
    ],
)
async def test_fallback_outbound(framework: Framework, inbound: Any, extra: dict) -> None:
    log: list[Any] = []
    framework.registry.register(AsyncAnswering("render_outbound", None), "none")
    framework.registry.register(Answering("resolve_session", "sid"), "resolver")
    framework.registry.register(TextModel("answer"), "model")
    framework.registry.register(Dispatcher("d", log), "dispatcher")
    result = await framework.process_inbound(inbound)
    expected = {"content": "answer", "session_id": "sid", **extra}
    assert result.outbounds == [expected]
    assert log == [("d", expected)]


@pytest.mark.anyio
async def test_dispatch_failure_fails_the_turn_after_save_state(framework: Framework) -> None:
    log: list[Any] = []
    recorder = Recorder(log, {"render_outbound": ["one", "two"]})
    failure = BrokenPipeError("channel gone")
    framework.registry.register(recorder, "recorder")
    framework.registry.register(Dispatcher("broken", log, answer=failure), "broken")
    framework.registry.register(TextModel("answer"), "model")
    with pytest.raises(BrokenPipeError):
        await framework.process_inbound({"content": "hi"})
    # The failing (newer) dispatcher runs first: the recorder never sees an outbound and
    # the second outbound is never dispatched.
    assert ("broken", "one") in log
    assert ("broken", "two") not in log
    assert "dispatch_outbound" not in log
    assert log.index("save_state") < log.index(("broken", "one"))
    assert [c["error"] for c in errors(recorder, "turn")] == [failure]


# -- envelope forms --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [False, True])
async def test_plain_object_envelope_end_to_end(
    framework: Framework, stream_output: bool
) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    framework.registry.register(recorder, "recorder")
    framework.registry.register(TextModel("reply"), "model")
    inbound = types.SimpleNamespace(content="hello", channel="web", chat_id="c1")
    result = await framework.process_inbound(inbound, stream_output=stream_output)
    assert result.session_id == "web:c1"
    assert result.prompt == ["hello"]
    assert result.model_output == "reply"
    assert result.outbounds == [
        {"content": "reply", "session_id": "web:c1", "channel": "web", "chat_id": "c1"}
    ]
    assert recorder.calls["resolve_session"][0]["message"] is inbound
    assert recorder.calls["save_state"][0]["message"] is inbound
