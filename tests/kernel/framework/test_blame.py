"""Plugin failures outside a turn's hooks name the plugin to blame: a resource that fails
when the running() scope starts or stops, and results the pipeline turns or ignores as the
reference does (a non-str session id, a non-dict state fragment)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from hookline.kernel import hookimpl
from hookline.kernel.framework.core import Framework

pytestmark = pytest.mark.anyio


class FailsAtStart:
    @hookimpl
    async def provide_lifespan(self) -> AsyncIterator[None]:
        raise RuntimeError("cannot start")
        yield


class FailsAtStop:
    @hookimpl
    def provide_lifespan(self) -> Iterator[None]:
        yield
        raise RuntimeError("cannot stop")


class Quiet:
    @hookimpl
    async def provide_lifespan(self) -> AsyncIterator[None]:
        yield


def framework_with(tmp_path: Path, **plugins: object) -> Framework:
    framework = Framework(workspace=tmp_path)
    for name, plugin in plugins.items():
        framework.registry.register(plugin, name=name)
    return framework


async def test_a_lifespan_failing_at_start_is_noted_with_its_plugin(tmp_path: Path) -> None:
    framework = framework_with(tmp_path, quiet=Quiet(), starter=FailsAtStart())
    with pytest.raises(RuntimeError) as raised:
        async with framework.running():
            pass
    assert str(raised.value) == "cannot start"
    (note,) = raised.value.__notes__
    assert note.startswith(f"raised by plugin 'starter', function 'FailsAtStart.provide_lifespan' "
                           f"({__file__}:")
    assert note.endswith("), hook provide_lifespan, when the running() scope started")


async def test_a_lifespan_failing_at_stop_is_noted_and_the_body_error_is_not(
    tmp_path: Path,
) -> None:
    framework = framework_with(tmp_path, stopper=FailsAtStop(), quiet=Quiet())
    with pytest.raises(RuntimeError) as raised:
        async with framework.running():
            pass
    assert str(raised.value) == "cannot stop"
    (note,) = raised.value.__notes__
    assert "plugin 'stopper', function 'FailsAtStop.provide_lifespan'" in note
    assert note.endswith("hook provide_lifespan, when the running() scope stopped")

    body_error = ValueError("from the body")
    with pytest.raises(ValueError) as raised_body:
        async with framework_with(tmp_path, quiet=Quiet()).running():
            raise body_error
    assert raised_body.value is body_error
    assert not getattr(body_error, "__notes__", None)


class ListSession:
    @hookimpl
    def resolve_session(self) -> Any:
        return ["a", "b"]

    @hookimpl
    def load_state(self) -> Any:
        return ["not", "a", "dict"]

    @hookimpl
    def run_model(self) -> str:
        return "ok"


async def test_non_text_session_ids_and_non_dict_states_are_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    framework = framework_with(tmp_path, lists=ListSession())
    with caplog.at_level("WARNING", logger="hookline"):
        result = await framework.process_inbound({"content": "hi"})
    assert result.session_id == "['a', 'b']"  # as the reference: str() of the result
    assert "['not', 'a', 'dict']" not in str(result.state)
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("hook.resolve_session_not_text plugin 'lists', function "
                            "'ListSession.resolve_session'") and "returned list" in m
               for m in messages), messages
    assert any(m.startswith("hook.load_state_ignored plugin 'lists', function "
                            "'ListSession.load_state'") and "returned list" in m
               for m in messages), messages


def test_the_cli_error_line_names_the_plugin_whose_lifespan_failed(tmp_path: Path) -> None:
    plugin = tmp_path / "broken_lifespan.py"
    plugin.write_text(textwrap.dedent('''
        from hookline.kernel import hookimpl

        class Broken:
            @hookimpl
            async def provide_lifespan(self):
                raise RuntimeError("database unreachable")
                yield

        def create(framework):
            return Broken()
    '''))
    script = textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from hookline.cli.app import create_app
        from hookline.kernel.framework.core import Framework
        import broken_lifespan
        framework = Framework(workspace={str(tmp_path)!r})
        framework.load_hooks()
        framework.registry.register(broken_lifespan.Broken(), name="broken")
        create_app(framework)(["run", "hi"])
    ''')
    env = {"HOOKLINE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith("error: database unreachable (raised by plugin 'broken', "
                                "function 'Broken.provide_lifespan'"), done.stderr
