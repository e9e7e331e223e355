"""`Registry.validate`: every problem `register` would meet, with `register`'s own words,
and nothing registered."""

from __future__ import annotations

import pytest

from hookline.kernel import HOOK_SPECS, PluginValidationError, Registry, hookimpl
from hookline.kernel._dispatch import HookimplMarker, PluginCheck, PluginProblem
from hookline.kernel.hooks import IMPL_PROJECTS


class Broken:
    @hookimpl(wrapper=True)
    def load_state(self, message: object, sesion_id: object, *, retries: int) -> None: ...

    @hookimpl
    def render_outbound(self, message: object, /) -> None: ...

    @hookimpl
    def resolve_sesion(self, message: object) -> None: ...

    def provide_tools(self) -> None: ...


def test_validate_lists_every_problem_and_registers_nothing() -> None:
    registry = Registry(HOOK_SPECS)
    check = registry.validate(Broken(), "broken")
    assert isinstance(check, PluginCheck) and not check.ok
    assert check.plugin_name == "broken"
    assert [impl.hook_name for impl in check.impls] == [
        "load_state", "render_outbound", "resolve_sesion"]
    assert [(p.hook_name, p.code, p.fatal) for p in check.problems] == [
        ("load_state", "wrapper", True),
        ("load_state", "unknown-parameter", True),
        ("provide_tools", "unmarked", False),
        ("render_outbound", "positional-only", True),
        ("resolve_sesion", "unknown-hook", False),
    ]
    unknown = check.problems[-1]
    assert unknown.suggestion == "resolve_session"
    assert unknown.fix.startswith("did you mean 'resolve_session'? ")
    assert registry.list_name_plugin() == [] and registry.hook_impls("load_state") == ()
    assert registry.unknown_impls == ()


def test_the_first_problem_is_what_register_raises() -> None:
    registry = Registry(HOOK_SPECS)
    first: PluginProblem = registry.validate(Broken(), "broken").problems[0]
    with pytest.raises(PluginValidationError) as raised:
        registry.register(Broken(), name="broken")
    assert str(raised.value) == first.message()
    assert raised.value.code == first.code == "wrapper"
    assert first.message().endswith(f"{first.reason}; {first.fix}")


@pytest.mark.parametrize(("code", "body"), [
    ("unknown-parameter", "def load_state(self, message, sesion_id): ..."),
    ("unknown-parameter", "def load_state(self, message, *, sesion_id): ..."),
    ("positional-only", "def load_state(self, message, /): ..."),
    ("tryfirst-trylast", "def load_state(self, message): ..."),
])
def test_register_errors_carry_their_code(code: str, body: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"class P:\n    {body}\n", namespace)  # a one-line fixture
    plugin = namespace["P"]
    function = plugin.load_state  # type: ignore[attr-defined]
    options = {"tryfirst": True, "trylast": True} if code == "tryfirst-trylast" else {}
    hookimpl(**options)(function)
    with pytest.raises(PluginValidationError) as raised:
        Registry(HOOK_SPECS).register(plugin(), name="p")  # type: ignore[operator]
    assert raised.value.code == code


def test_a_valid_plugin_is_ok_and_reads_the_registry_projects() -> None:
    bub_impl = HookimplMarker("bub")

    class Fine:
        @hookimpl
        def build_prompt(self, message: object) -> str:
            return "x"

        @bub_impl(tryfirst=True)
        def resolve_session(self, message: object) -> str:
            return "s"

    hookline_only = Registry(HOOK_SPECS).validate(Fine(), "fine")
    assert hookline_only.ok
    assert [p.code for p in hookline_only.problems] == ["unmarked"]  # bub's mark unread
    both = Registry(HOOK_SPECS, projects=IMPL_PROJECTS).validate(Fine(), "fine")
    assert both.ok and both.problems == ()
    assert [impl.hook_name for impl in both.impls] == ["build_prompt", "resolve_session"]
