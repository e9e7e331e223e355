"""hookline.testing's fixtures and helpers, used as a plugin author would (asyncio and trio).

The pytest plugin is active here through its pytest11 entry point, like in any project
installed beside hookline; tests/testing/test_pytester.py checks that activation itself.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hookline.builtins.config import Settings, SettingsError
from hookline.kernel import Framework, StreamEvent, hookimpl
from hookline.kernel.errors import HooklineError
from hookline.testing import (
    FrameworkFactory,
    HookTrace,
    build_framework,
    builtin_plugin,
    capture_errors,
    run_turn,
    run_turn_sync,
    scripted_model,
    trace_hooks,
)

pytestmark = pytest.mark.anyio


class Greeter:
    """A plugin as authors write them: the framework in __init__, one hook."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework

    @hookimpl
    def system_prompt(self, prompt: Any, state: dict[str, Any]) -> str:
        return "Greet the user by name."


class Sessions:
    @hookimpl
    def resolve_session(self, message: Any) -> str:
        return "fixed:session"


class Quiet:
    @hookimpl
    def resolve_session(self, message: Any) -> None:
        return None


class Echo:
    @hookimpl
    def run_model(self, prompt: Any) -> str:
        return f"echo: {prompt}"


class BrokenPrompt:
    @hookimpl
    def build_prompt(self, message: Any) -> str:
        raise RuntimeError("template missing")


# -- the fixtures ----------------------------------------------------------------------------


@pytest.fixture
def leaky_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings of the machine running the tests, set before hookline_home runs."""
    monkeypatch.setenv("HOOKLINE_MODEL", "openai:gpt-4o")
    monkeypatch.setenv("HOOKLINE_MAX_STEPS", "7")
    monkeypatch.setenv("REPUBLIC_OPENAI_API_KEY", "sk-not-for-tests")


def test_home_is_temporary_and_isolated(leaky_environment: None, hookline_home: Path,
                                        tmp_path: Path) -> None:
    assert os.environ["HOOKLINE_HOME"] == str(hookline_home)
    assert hookline_home.is_dir() and hookline_home.is_relative_to(tmp_path)
    leaked = [name for name in os.environ
              if name.startswith(("HOOKLINE_", "REPUBLIC_")) and name != "HOOKLINE_HOME"]
    assert leaked == []


def test_workspace_is_an_empty_temporary_folder(hookline_workspace: Path,
                                                hookline_framework: FrameworkFactory) -> None:
    assert list(hookline_workspace.iterdir()) == []
    assert hookline_framework().workspace == hookline_workspace.resolve()


def test_factory_registers_builtin_then_plugins(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(Greeter, Sessions(), ("named", Quiet()), Sessions())
    names = [name for name, _ in framework.registry.list_name_plugin()]
    assert names == ["builtin", "Greeter", "Sessions", "named", "Sessions-2"]
    greeter = framework.registry.get_plugin("Greeter")
    assert isinstance(greeter, Greeter) and greeter.framework is framework, \
        "a class is called with the framework, as the entry point loader calls it"
    assert hookline_framework.made == [framework]


def test_factory_without_the_builtin(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(Echo(), builtin=False)
    assert [name for name, _ in framework.registry.list_name_plugin()] == ["Echo"]
    with pytest.raises(LookupError, match="no builtin plugin"):
        builtin_plugin(framework)
    with pytest.raises(ValueError, match="configure the builtin plugin"):
        hookline_framework(builtin=False, script=[{"text": "x"}])


def test_a_class_that_takes_no_framework_is_explained(
        hookline_framework: FrameworkFactory) -> None:
    with pytest.raises(TypeError, match=r"Sessions\(framework\) failed.*pass an instance"):
        hookline_framework(Sessions)


def test_settings_from_a_mapping_a_config_file_or_an_object(
        hookline_framework: FrameworkFactory, hookline_home: Path) -> None:
    (hookline_home / "config.toml").write_text('max_steps = 3\nmax_tokens = 50\n')
    settings = builtin_plugin(hookline_framework(settings={"max_steps": 2})).get_settings()
    assert (settings.max_steps, settings.max_tokens, settings.home) == (2, 50, hookline_home)
    assert builtin_plugin(hookline_framework()).get_settings().max_steps == 3
    with pytest.raises(SettingsError, match="max_steps"):
        hookline_framework(settings={"max_steps": 0})
    given = Settings(home=hookline_home, max_steps=9)
    assert builtin_plugin(hookline_framework(settings=given)).get_settings() is given


def test_entry_points_by_name(hookline_framework: FrameworkFactory, tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    info = site / "greeter_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "greeter_plugin.py").write_text(
        "from hookline.kernel import hookimpl\n"
        "class GreeterPlugin:\n"
        "    def __init__(self, framework):\n"
        "        self.framework = framework\n"
        "    @hookimpl\n"
        "    def system_prompt(self, prompt, state):\n"
        "        return 'Greet.'\n"
        "instance = GreeterPlugin(None)\n")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: greeter-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[hookline]\ngreeter = greeter_plugin:GreeterPlugin\n"
        "as-is = greeter_plugin:instance\n")
    monkeypatch.syspath_prepend(str(site))
    framework = hookline_framework(Sessions(), entry_points=("greeter", "as-is"))
    assert [name for name, _ in framework.registry.list_name_plugin()] == [
        "builtin", "greeter", "as-is", "Sessions"]
    greeter = framework.registry.get_plugin("greeter")
    assert type(greeter).__name__ == "GreeterPlugin" and greeter.framework is framework  # type: ignore[attr-defined]
    assert framework.registry.get_plugin("as-is").framework is None  # type: ignore[union-attr]
    assert hookline_framework(entry_points="greeter").registry.get_plugin("greeter")
    with pytest.raises(LookupError, match=r"no entry point 'gretter'.*installed: as-is, greeter"):
        hookline_framework(entry_points=("gretter",))


def test_build_framework_without_pytest_fixtures(tmp_path: Path) -> None:
    framework = build_framework(Sessions(), home=tmp_path / "home", workspace=tmp_path,
                                script=[{"text": "hi"}])
    assert scripted_model(framework).remaining == 1
    assert builtin_plugin(framework).get_settings().home == tmp_path / "home"


# -- scripted models --------------------------------------------------------------------------


async def test_a_scripted_turn_with_a_tool_call(hookline_framework: FrameworkFactory,
                                                hookline_workspace: Path) -> None:
    (hookline_workspace / "notes.txt").write_text("hello there")
    framework = hookline_framework(Greeter, script=[
        {"tool_calls": [{"name": "fs_read", "arguments": {"path": "notes.txt"}}]},
        {"text": ["The file ", "says hello."]},
    ])
    turn = await run_turn(framework, "read notes.txt")
    assert turn.reply == turn.text == "The file says hello."
    assert turn.event_kinds() == ["tool_call", "tool_result", "final", "text", "text", "final"]
    assert turn.events[1].data["tool_results"][0]["output"] == "hello there"
    assert [call["name"] for call in turn.tool_calls()] == ["fs_read"]
    assert [(result["output"], result["outcome"]) for result in turn.tool_results()] == [
        ("hello there", "ran")]
    assert turn.entry_kinds() == ["anchor", "message", "tool_call", "tool_result", "message",
                                  "event"]
    assert turn.entries[1].payload == {"role": "user", "content": "read notes.txt"}
    assert turn.session_id == "test:default" and turn.errors == []
    assert [outbound["content"] for outbound in turn.outbounds] == ["The file says hello."]
    assert turn.delivered == turn.outbounds
    model = scripted_model(framework)
    assert model.used == 2 and model.remaining == 0
    assert "Greet the user by name." in model.calls[0].messages[0].text
    assert "fs_read" in model.calls[0].tool_names


async def test_script_as_a_dict_or_a_toml_file(hookline_framework: FrameworkFactory,
                                               tmp_path: Path) -> None:
    turn = await run_turn(hookline_framework(script={"turns": [{"text": "from a dict"}]}), "x")
    assert turn.reply == "from a dict"
    path = tmp_path / "demo.toml"
    path.write_text('[[turns]]\ntext = "from TOML"\n')
    framework = hookline_framework(script=path)
    assert builtin_plugin(framework).get_settings().model == f"scripted:{path}"
    assert (await run_turn(framework, "x")).reply == "from TOML"


def test_a_bad_script_fails_when_the_framework_is_made(
        hookline_framework: FrameworkFactory) -> None:
    with pytest.raises(HooklineError, match="turn 1 has unknown key"):
        hookline_framework(script=[{"txt": "typo"}])


async def test_a_model_error_is_reported_and_the_turn_goes_on(
        hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(script=[{"error": {"kind": "provider", "message": "down"}}])
    turn = await run_turn(framework, "hi")
    assert turn.reply == "" and turn.event_kinds() == ["error"]
    assert turn.errors[0].stage == "run_model" and "down" in str(turn.errors[0])
    assert [outbound["kind"] for outbound in turn.delivered] == ["error", "normal"]
    assert turn.outbounds == turn.delivered[1:], "the error notice is delivered, not rendered"


async def test_a_delay_lets_a_test_cancel_a_turn(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(script=[{"text": "too late", "delay": 5}, {"text": "next"}])
    with anyio.move_on_after(0.2) as scope:
        await run_turn(framework, "hi")
    assert scope.cancelled_caught
    assert framework.router is None and not framework.in_scope
    assert (await run_turn(framework, "again")).reply == "next"


async def test_the_text_path(hookline_framework: FrameworkFactory) -> None:
    turn = await run_turn(hookline_framework(script=[{"text": "quiet"}]), "hi", stream=False)
    assert turn.reply == "quiet" and turn.events == []


# -- turns ------------------------------------------------------------------------------------


async def test_turns_inside_a_scope_share_it(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(script=[{"text": "one"}, {"text": "two"}])
    async with framework.running():
        first = await run_turn(framework, "a")
        second = await run_turn(framework, "b")
        assert framework.in_scope
    assert first.entry_kinds() == ["anchor", "message", "message", "event"]
    assert second.entry_kinds() == ["message", "message", "event"], "only its own entries"
    assert [entry.payload.get("content") for entry in second.entries[:2]] == ["b", "two"]


async def test_message_envelopes_and_sessions(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(script=[{"text": "1"}, {"text": "2"}, {"text": "3"}])
    assert (await run_turn(framework, "a", session_id="s-1")).session_id == "s-1"
    turn = await run_turn(framework, "b", channel="tg", chat_id="42")
    assert turn.session_id == "tg:42" and turn.message["channel"] == "tg"
    envelope = {"content": "c", "session_id": "mine"}
    turn = await run_turn(framework, envelope)
    assert turn.message is envelope and turn.session_id == "mine"
    with pytest.raises(ValueError, match="session_id= applies to a text message"):
        await run_turn(framework, envelope, session_id="other")


async def test_a_failing_turn_raises_or_is_kept(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(BrokenPrompt(), script=[])
    with pytest.raises(RuntimeError, match="template missing"):
        await run_turn(framework, "hi")
    turn = await run_turn(framework, "hi", check=False)
    assert isinstance(turn.error, RuntimeError) and turn.result is None
    assert [(report.stage, str(report.error)) for report in turn.errors] == [
        ("turn", "template missing")]
    assert turn.trace.calls("build_prompt") == ["BrokenPrompt"]
    assert turn.trace.for_hook("build_prompt")[0].error == "RuntimeError: template missing"
    with pytest.raises(AssertionError, match="the turn raised"):
        _ = turn.reply
    assert [name for name, _ in framework.registry.list_name_plugin()] == [
        "builtin", "BrokenPrompt"], "the error observer is gone after the turn"


class Recorder:
    """A router bound before run_turn: it must still see everything."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self.dispatched: list[Any] = []

    def wrap_stream(self, message: Any, stream: Any) -> AsyncIterator[StreamEvent]:
        return self._watch(stream)

    async def _watch(self, stream: Any) -> AsyncIterator[StreamEvent]:
        async for event in stream:
            self.events.append(event)
            yield event

    async def dispatch(self, message: Any) -> bool:
        self.dispatched.append(message)
        return True


async def test_a_bound_router_still_gets_the_turn(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(script=[{"text": "hi"}])
    recorder = Recorder()
    framework.router = recorder
    turn = await run_turn(framework, "x")
    assert recorder.events == turn.events and recorder.dispatched == turn.delivered
    assert framework.router is recorder


def test_run_turn_sync(hookline_framework: FrameworkFactory, anyio_backend: str) -> None:
    framework = hookline_framework(script=[{"text": "sync"}])
    assert run_turn_sync(framework, "hi", backend=anyio_backend).reply == "sync"


# -- which plugin answered ------------------------------------------------------------------------


async def test_trace_says_who_answered(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(Quiet(), Sessions(), Greeter, script=[{"text": "hi"}])
    turn = await run_turn(framework, "x")
    trace = turn.trace
    assert isinstance(trace, HookTrace) and len(trace) == len(list(trace))
    assert trace.hooks()[:4] == ["resolve_session", "provide_environment", "load_state",
                                 "build_prompt"]
    assert turn.session_id == "fixed:session"
    trace.assert_answered("resolve_session", "Sessions")
    trace.assert_calls("resolve_session", ["Sessions"])  # newest first: Quiet never ran
    trace.assert_not_called("resolve_session", "Quiet")
    trace.assert_calls("system_prompt", ["Greeter", "builtin"])
    assert trace.answers("system_prompt") == ["Greeter", "builtin"]
    assert trace.answered_by("run_model_stream") == "builtin"
    assert trace.value("system_prompt", "Greeter") == "'Greet the user by name.'"
    assert trace.value("system_prompt", "Quiet") is None
    assert trace.answered_by("run_model") is None
    assert "resolve_session" in trace.format()


async def test_trace_assertions_explain_failures(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(Quiet(), script=[{"text": "hi"}])
    trace = (await run_turn(framework, "x")).trace
    with pytest.raises(AssertionError, match=(
            r"hook 'resolve_session' was answered by 'builtin', not 'Quiet'; calls: "
            r"Quiet \(Quiet.resolve_session\) -> None; builtin .* -> 'test:default'")):
        trace.assert_answered("resolve_session", "Quiet")
    with pytest.raises(AssertionError, match=r"ran \['Quiet', 'builtin'\], expected \['Quiet'\]"):
        trace.assert_calls("resolve_session", ["Quiet"])
    with pytest.raises(AssertionError, match=r"calls: none \(hooks that ran: resolve_session,"):
        trace.assert_calls("run_model", ["Echo"])
    with pytest.raises(AssertionError, match="hook 'resolve_session' ran for plugin 'Quiet'"):
        trace.assert_not_called("resolve_session", "Quiet")
    trace.assert_not_called("run_model")
    # A misspelt name fails, rather than pass for want of calls.
    with pytest.raises(AssertionError, match=r"no hook is named 'resolve_sesion' on this "
                                             r"framework; did you mean 'resolve_session'\?"):
        trace.assert_not_called("resolve_sesion")
    with pytest.raises(AssertionError, match=r"no plugin is named 'Qiuet'.*'Quiet'\?"):
        trace.assert_not_called("run_model", "Qiuet")
    with pytest.raises(AssertionError, match=r"no plugin is named 'Qiuet'"):
        trace.value("resolve_session", "Qiuet")


async def test_trace_hooks_outside_a_turn_and_inside_another_trace(
        hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(script=[{"text": "hi"}])
    with trace_hooks(framework) as trace:
        async with framework.running():
            pass
    assert trace.calls("provide_tape_store") == ["builtin"]
    assert trace.calls("provide_lifespan") == ["builtin"]
    assert framework.registry.tracer is None
    with framework.runtime.tracing() as outer:
        turn = await run_turn(framework, "x")
    assert turn.trace.answered_by("resolve_session") == "builtin"
    assert len(outer) > len(turn.trace) > 0, "the outer trace kept recording the scope too"
    assert all(not record.plugin.startswith("hookline.testing") for record in outer)


async def test_capture_errors(hookline_framework: FrameworkFactory) -> None:
    framework = hookline_framework(builtin=False)
    with capture_errors(framework) as errors:
        await framework.runtime.notify_error("custom", ValueError("bad"), {"content": "m"})
        turn = await run_turn(framework, "hello")
    assert errors.stages() == ["custom", "run_model"]
    assert errors[0].message == {"content": "m"} and str(errors[0]) == "custom: ValueError: bad"
    assert len(errors) == 2 and [report.stage for report in errors] == errors.stages()
    assert turn.reply == "hello", "with no model the prompt is echoed"
    assert [str(report.error) for report in turn.errors] == ["no model skill returned output"]
    assert [name for name, _ in framework.registry.list_name_plugin()] == []
    assert "custom: ValueError: bad" in repr(errors)
