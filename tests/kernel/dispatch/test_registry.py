"""Kernel behaviour beyond the conformance fixtures: tracing, reports, foreign markers,
custom specs, generated plans, error messages."""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import pytest

from hookline.kernel import (
    HOOK_SPECS,
    DispatchTrace,
    HookRuntime,
    PluginValidationError,
    Registry,
    hookimpl,
    hookspec,
)
from hookline.kernel.hooks import IMPL_PROJECTS


def make_runtime(projects: tuple[str, ...] | None = None) -> tuple[Registry, HookRuntime]:
    registry = Registry(HOOK_SPECS, projects=projects)
    return registry, HookRuntime(registry)


class Answer:
    def __init__(self, value: object) -> None:
        self.value = value

    @hookimpl
    def resolve_session(self, message):
        return self.value


class Failing:
    @hookimpl(tryfirst=True)
    def resolve_session(self, message):
        raise RuntimeError("no session for you")


def test_trace_records_which_plugin_answered() -> None:
    registry, runtime = make_runtime()
    registry.register(Answer(None), "quiet")
    registry.register(Answer("s-1"), "loud")
    with runtime.tracing() as trace:
        assert runtime.call_first_sync("resolve_session", message={}) == "s-1"
    assert [(r.plugin, r.value, r.error) for r in trace] == [("loud", "'s-1'", None)]
    assert trace.records[0].duration_ms >= 0
    assert "loud" in trace.format()


def test_trace_records_exceptions_and_is_swapped_out_afterwards() -> None:
    registry, runtime = make_runtime()
    registry.register(Answer("x"), "answer")
    registry.register(Failing(), "failing")
    trace = DispatchTrace()
    with runtime.tracing(trace), pytest.raises(RuntimeError):
        runtime.call_first_sync("resolve_session", message={})
    assert [(r.plugin, r.error) for r in trace] == [
        ("failing", "RuntimeError: no session for you")
    ]
    registry.unregister("failing")
    runtime.call_first_sync("resolve_session", message={})
    assert len(trace) == 1, "the untraced plan is back after the block"
    assert registry.plans["resolve_session"].impls[0].function.__name__ == "resolve_session"


@pytest.mark.anyio
async def test_trace_covers_async_implementations() -> None:
    class AsyncAnswer:
        @hookimpl
        async def load_state(self, message, session_id):
            return {"k": session_id}

    registry, runtime = make_runtime()
    registry.register(AsyncAnswer(), "a")
    with runtime.tracing() as trace:
        assert await runtime.call_many("load_state", message={}, session_id="s") == [{"k": "s"}]
    assert [r.value for r in trace] == ["{'k': 's'}"]


@pytest.mark.anyio
async def test_trace_covers_the_slow_paths_and_observers() -> None:
    """call_each, call_first_each (and their sync forms) and notify go through the
    tracer too, so a trace shows every hook a framework stage dispatched."""

    class Observer:
        @hookimpl
        async def on_error(self, stage, error):
            raise RuntimeError("observer down")

    registry, runtime = make_runtime()
    registry.register(Answer(None), "quiet")
    registry.register(Answer("s-1"), "loud")
    registry.register(Observer(), "observer")
    with runtime.tracing() as trace:
        pairs = await runtime.call_each("resolve_session", message={})
        _impl, value = await runtime.call_first_each("resolve_session", message={})
        runtime.call_each_sync("resolve_session", message={})
        runtime.call_first_each_sync("resolve_session", message={})
        await runtime.notify_error("turn", ValueError("bad"))
    assert [impl.plugin_name for impl, _ in pairs] == ["loud", "quiet"] and value == "s-1"
    assert [(r.hook, r.plugin, r.value) for r in trace] == [
        ("resolve_session", "loud", "'s-1'"), ("resolve_session", "quiet", "None"),
        ("resolve_session", "loud", "'s-1'"),
        ("resolve_session", "loud", "'s-1'"), ("resolve_session", "quiet", "None"),
        ("resolve_session", "loud", "'s-1'"),
        ("on_error", "observer", "-"),
    ]
    assert trace.records[-1].error == "RuntimeError: observer down"
    await runtime.call_each("resolve_session", message={})
    assert len(trace) == 7, "nothing is recorded after the block"


@pytest.mark.anyio
async def test_call_first_each_is_compiled_and_names_the_implementation_that_answered() -> None:
    class AsyncAnswer:
        @hookimpl
        async def resolve_session(self, message):
            return message.get("id")

    registry, runtime = make_runtime()
    assert await runtime.call_first_each("resolve_session", message={}) == (None, None)
    registry.register(Answer(None), "quiet")
    registry.register(AsyncAnswer(), "async")
    registry.register(Answer(None), "newest")
    impl, value = await runtime.call_first_each("resolve_session", message={"id": "s-9"})
    assert (impl.plugin_name if impl else None, value) == ("async", "s-9")
    assert await runtime.call_first_each("resolve_session", message={}) == (None, None)
    source = registry.plans["resolve_session"].source("first_each")
    assert "return (_i1, _v)" in source and "for " not in source  # straight-line code
    registry.register(Answer("late"), "latest")  # a new plan, compiled afresh
    impl, value = await runtime.call_first_each("resolve_session", message={"id": "s-9"})
    assert (impl.plugin_name if impl else None, value) == ("latest", "late")


def test_report_lists_all_hooks_with_execution_and_stored_order() -> None:
    registry, runtime = make_runtime()
    registry.register(Answer("a"), "first")
    registry.register(Answer("b"), "second")
    report = runtime.hook_report()
    assert len([h for h in report.hooks if h.kind is not None]) == len(HOOK_SPECS)
    binding = report.binding("resolve_session")
    assert [i.plugin for i in binding.execution] == ["second", "first"]
    assert [i.plugin for i in binding.stored] == ["first", "second"]
    assert binding.kind == "first"
    assert report.binding("load_state").execution == ()
    data = json.loads(json.dumps(report.as_dict()))
    assert data["hooks"][0]["name"] == "resolve_session"
    assert "resolve_session: runs second > first  (stored: first, second)" in report.format()


def test_unknown_hook_is_reported_with_suggestion(caplog: pytest.LogCaptureFixture) -> None:
    class Typo:
        @hookimpl
        def provide_tool(self):
            return []

    registry, runtime = make_runtime()
    with caplog.at_level(logging.WARNING):
        registry.register(Typo(), "typo")
    (unknown,) = runtime.hook_report().unknown
    assert (unknown.hook_name, unknown.suggestion) == ("provide_tool", "provide_tools")
    assert "did you mean 'provide_tools'?" in caplog.text
    assert "did you mean 'provide_tools'?" in runtime.hook_report().format()
    registry.unregister("typo")
    assert runtime.hook_report().unknown == ()


def test_bub_marker_attribute_is_recognised() -> None:
    def resolve_session(message):
        return "from-bub"

    resolve_session.bub_impl = {"tryfirst": True}  # what Bub's own marker stores
    plugin = type("BubPlugin", (), {"resolve_session": staticmethod(resolve_session)})
    registry, runtime = make_runtime(IMPL_PROJECTS)
    registry.register(Answer("ours"), "ours")
    registry.register(plugin, "bub")
    assert runtime.call_first_sync("resolve_session", message={}) == "from-bub"
    assert registry.hook_impls("resolve_session")[0].tryfirst


def test_bub_wrapper_marker_is_rejected_too() -> None:
    def resolve_session(message):
        yield

    resolve_session.bub_impl = {"hookwrapper": True}
    plugin = type("BubWrapper", (), {"resolve_session": staticmethod(resolve_session)})
    with pytest.raises(PluginValidationError, match="no wrapper support"):
        Registry(HOOK_SPECS, projects=IMPL_PROJECTS).register(plugin, "bub")


def test_validation_error_carries_structured_fields() -> None:
    class Extra:
        @hookimpl
        def load_state(self, message, extra):
            return None

    with pytest.raises(PluginValidationError) as info:
        Registry(HOOK_SPECS).register(Extra(), "extra")
    error = info.value
    assert (error.plugin_name, error.hook_name) == ("extra", "load_state")
    assert error.function.endswith("Extra.load_state")
    assert error.location.startswith(f"{__file__}:")
    assert "(message, session_id)" in str(error)


def test_custom_specs_validate_existing_implementations() -> None:
    class Plugin:
        @hookimpl
        def greet(self, name):
            return f"hi {name}"

    class Specs:
        @hookspec(kind="first")
        def greet(self, name):
            """Greet someone."""

    registry, runtime = make_runtime()
    registry.register(Plugin(), "p")
    assert [u.hook_name for u in registry.unknown_impls] == ["greet"]
    assert registry.add_hookspecs(Specs) == ["greet"]
    assert registry.unknown_impls == ()
    assert runtime.call_first_sync("greet", name="bob") == "hi bob"

    class BadSpecs:
        @hookspec(kind="first")
        def wave(self, whom):
            """Wave."""

    class Waver:
        @hookimpl
        def wave(self, hand):
            return hand

    registry.register(Waver(), "w")
    with pytest.raises(PluginValidationError, match="'hand'"):
        registry.add_hookspecs(BadSpecs)
    assert "wave" not in registry.specs


def test_spec_with_unknown_kind_is_refused() -> None:
    class Specs:
        @hookspec(kind="sometimes")
        def odd(self):
            """Odd."""

    with pytest.raises(ValueError, match="unknown kind 'sometimes'"):
        Registry(HOOK_SPECS).add_hookspecs(Specs)


def test_plan_is_compiled_once_and_shows_its_source() -> None:
    registry, runtime = make_runtime()
    registry.register(Answer("x"), "a")
    plan = registry.plans["resolve_session"]
    runtime.call_first_sync("resolve_session", message={})
    caller = plan.first_sync
    runtime.call_first_sync("resolve_session", message={})
    assert plan.first_sync is caller
    assert "_f0(message=_a0)" in plan.source("first_sync")
    registry.register(Answer("y"), "b")
    assert registry.plans["resolve_session"] is not plan, "a change builds a new plan"


def test_missing_argument_names_the_implementation() -> None:
    registry, runtime = make_runtime()
    registry.register(Answer("x"), "answer")
    with pytest.raises(TypeError, match=r"without argument 'message'.*plugin 'answer'"):
        runtime.call_first_sync("resolve_session")


def test_registration_never_runs_properties_or_descriptors() -> None:
    reads: list[str] = []

    class Lazy:
        def __get__(self, instance: object, owner: type | None = None) -> object:
            reads.append("descriptor")
            raise RuntimeError("do not touch")

    class Touchy:
        lazy = Lazy()

        @property
        def boom(self) -> str:
            reads.append("property")
            raise RuntimeError("do not touch")

        @property
        def resolve_session_prop(self) -> Any:
            reads.append("hook-named property")
            return None

        @functools.cached_property
        def expensive(self) -> int:
            reads.append("cached_property")
            return 1

        @hookimpl
        def resolve_session(self, message):
            return "t"

        @hookimpl
        @classmethod
        def load_state(cls, message):
            return {"from": cls.__name__}

        @hookimpl
        @staticmethod
        def build_prompt(message):
            return "static"

    registry = Registry(HOOK_SPECS)
    registry.register(Touchy(), "touchy")
    assert reads == [], "registration read no property or descriptor"
    assert [i.function_name.rsplit(".", 2)[-2:] for i in
            registry.hook_impls("resolve_session")] == [["Touchy", "resolve_session"]]
    runtime = HookRuntime(registry)
    assert runtime.call_first_sync("resolve_session", message="m") == "t"
    assert runtime.call_many_sync("load_state", message="m", session_id="s") == [
        {"from": "Touchy"}]
    assert runtime.call_first_sync("build_prompt", message="m", session_id="s",
                                   state={}) == "static"


def test_unregister_unknown_plugin_lists_registered_ones() -> None:
    registry = Registry(HOOK_SPECS)
    registry.register(Answer("x"), "answer")
    with pytest.raises(ValueError, match="registered: answer"):
        registry.unregister("nope")


@pytest.mark.parametrize("param", ["results", "kwargs", "_kwargs", "_results", "_v", "_f0", "_a0",
                                   "_PLAIN", "_skip", "_missing"])
def test_parameter_names_cannot_shadow_generated_code(param: str) -> None:
    from hookline.kernel import HookSpec

    registry = Registry({"h": HookSpec("h", (param,), "many_sync", project="hookline")})
    namespace: dict[str, object] = {}
    exec(f"def h({param}):\n    return {param}\n", namespace)
    registry.register(type("P", (), {"h": staticmethod(hookimpl(namespace["h"]))}), "p")
    runtime = HookRuntime(registry)
    assert runtime.call_many_sync("h", **{param: 5}) == [5]
    assert runtime.call_first_sync("h", **{param: 5}) == 5


@pytest.mark.anyio
async def test_first_result_type_errors_name_the_plugin_and_function() -> None:
    from hookline.kernel import Framework
    from hookline.kernel.channels import TurnSnapshot

    class Wrong:
        @hookimpl
        def admit_message(self, session_id, message, turn):
            return "process"

        @hookimpl
        def build_tape_context(self):
            return {}

    framework = Framework()
    with pytest.raises(TypeError, match="no plugin returned one"):
        framework.build_tape_context()
    framework.registry.register(Wrong(), "wrong")
    with pytest.raises(TypeError, match=r"AdmitDecision or None; plugin 'wrong', function "
                                        r"'.*Wrong.admit_message' \(.*\) returned str"):
        await framework.admit_message("s", {}, TurnSnapshot("s"))
    with pytest.raises(TypeError, match=r"TapeContext; plugin 'wrong'.* returned dict"):
        framework.build_tape_context()


# -- the dispatch core without the agent contract -------------------------------------------


def test_a_registry_starts_with_the_hooks_it_is_given() -> None:
    from hookline.kernel import Framework

    assert (dict(Registry().specs), Registry().projects) == ({}, ())
    registry = Registry(HOOK_SPECS)
    assert list(registry.specs) == list(HOOK_SPECS)
    assert registry.projects == ("hookline",)
    assert Framework().registry.projects == IMPL_PROJECTS == ("hookline", "bub")
    assert list(Framework().registry.specs) == list(HOOK_SPECS)


def test_a_registry_without_projects_reads_no_marks() -> None:
    registry = Registry()
    registry.register(Answer("x"), "answer")
    assert registry.plugin_hooks("answer") == set()
    assert registry.unknown_impls == ()
    registry.add_hookspecs(type("Specs", (), {"greet": hookspec(kind="first")(
        lambda self, name: None)}))
    assert registry.projects == ("hookline",)
    registry.register(Answer("y"), "later")
    assert [u.hook_name for u in registry.unknown_impls] == ["resolve_session"]


def test_only_a_registry_given_bubs_project_reads_bub_marks() -> None:
    def resolve_session(message):
        return "from-bub"

    resolve_session.bub_impl = {}
    plugin = type("BubPlugin", (), {"resolve_session": staticmethod(resolve_session)})
    plain, _ = make_runtime()
    plain.register(plugin, "bub")
    assert plain.hook_impls("resolve_session") == ()
    with_bub, runtime = make_runtime(IMPL_PROJECTS)
    with_bub.register(plugin, "bub")
    assert runtime.call_first_sync("resolve_session", message={}) == "from-bub"


def test_bad_specs_and_projects_are_refused_with_the_reason() -> None:
    from hookline.kernel import HookSpec
    from hookline.kernel._dispatch import HookimplMarker

    spec = HookSpec("greet", ("name",), "first", project="acme")
    with pytest.raises(ValueError, match="'greet' is given twice"):
        Registry([spec, spec])
    with pytest.raises(ValueError, match="'greet' is filed under another name, 'wave'"):
        Registry({"wave": spec})
    with pytest.raises(TypeError, match="'greet' must be a HookSpec, got tuple"):
        Registry({"greet": ("greet", ("name",), "first")})
    with pytest.raises(ValueError, match="hook specs already defined: resolve_session"):
        Registry(HOOK_SPECS).add_specs([HOOK_SPECS["resolve_session"]])
    with pytest.raises(ValueError, match="'my-app' must be a Python identifier"):
        Registry(projects=["my-app"])
    with pytest.raises(TypeError, match="a list of project names, not 'acme'"):
        Registry(projects="acme")
    with pytest.raises(ValueError, match="'my-app' must be a Python identifier"):
        HookimplMarker("my-app")


def test_notify_isolates_each_implementation_and_names_the_context(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    class Broken:
        @hookimpl(tryfirst=True)
        def on_error(self, stage):
            raise RuntimeError("observer down")

    class Recorder:
        @hookimpl
        def on_error(self, stage, error):
            seen.append(f"{stage}: {error}")

    registry, runtime = make_runtime()
    registry.register(Recorder(), "recorder")
    registry.register(Broken(), "broken")
    with caplog.at_level(logging.WARNING, logger="hookline.kernel.runtime"):
        runtime.notify_sync("on_error", "stage=tool", stage="tool", error="x", message=None)
        runtime.notify_sync("on_error", stage="turn", error="y", message=None)
    assert seen == ["tool: x", "turn: y"]
    assert [r.getMessage() for r in caplog.records] == [
        "hook.on_error_failed stage=tool adapter=broken",
        "hook.on_error_failed adapter=broken",
    ]
    assert all(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)
    assert {r.levelname for r in caplog.records} == {"WARNING"}, "as the reference logs it"


def test_the_kernel_exports_the_same_names_and_loads_them_on_first_use() -> None:
    import subprocess
    import sys

    import hookline.kernel as kernel

    assert kernel.__all__ == sorted(set(kernel.__all__))
    for name in kernel.__all__:
        assert getattr(kernel, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        kernel.nothing_here  # noqa: B018
    code = (
        "import sys\n"
        "import hookline.kernel._dispatch\n"
        "print(sorted(m for m in sys.modules if m.startswith('hookline.kernel.')"
        " and not m.startswith('hookline.kernel._dispatch')))\n"
        "from hookline.kernel import hookimpl\n"
        "print('hookline.kernel.framework.core' in sys.modules)\n"
        "import hookline.kernel\n"
        "print(hookline.kernel.tape.__name__, hookline.kernel.Framework.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.splitlines() == [
        "['hookline.kernel._lazy']",
        "False",
        "hookline.kernel.tape hookline.kernel.framework.core",
    ]


def test_an_option_dict_is_checked_as_the_marker_s_own_options_are() -> None:
    """Bub's marker stores a dict: `{"tryfirst": "no"}` is refused as `tryfirst="no"`
    is, not read as true; `{"tryfirst": "no", "trylast": "no"}` names the value, not a
    contradiction."""
    for options in ({"tryfirst": "no"}, {"tryfirst": "no", "trylast": "no"}):
        def resolve_session(message):
            return "x"

        resolve_session.bub_impl = options
        plugin = type("BubPlugin", (), {"resolve_session": staticmethod(resolve_session)})
        with pytest.raises(PluginValidationError, match="tryfirst='no' is not True or False"):
            Registry(HOOK_SPECS, projects=IMPL_PROJECTS).register(plugin, "bub")
