"""Tool calls are recorded and shown as they really ran: the tape's tool_result records
keep the outcome (ran, denied, replaced, failed), the arguments that ran and the model's
own when a plugin rewrote them; the terminal shows a line for every call that did not run
as the model asked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from builtin_support import build_builtin

from hookline.builtins.tape.naming import session_tape_name
from hookline.builtins.tape.tape import Tape
from hookline.builtins.terminal.tool_notes import tool_notes
from hookline.kernel import ToolCall, ToolCallDecision, hookimpl

pytestmark = pytest.mark.anyio

SESSION = "what-ran:chat"


class Policy:
    """Rewrites shell commands, denies writes, answers reads itself."""

    @hookimpl
    def before_tool_call(self, call: ToolCall) -> ToolCallDecision | None:
        if call.tool == "shell":
            return ToolCallDecision.proceed({"command": "echo rewritten"})
        if call.tool == "fs_write":
            return ToolCallDecision.deny("writes are not allowed here")
        if call.tool == "fs_read":
            return ToolCallDecision.replace("canned contents")
        return None


def calls(*specs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments, "id": f"call-{index}"}
                           for index, (name, arguments) in enumerate(specs)]}


async def test_the_tape_records_what_ran(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    turn = calls(("shell", {"command": "echo as the model asked"}),
                 ("fs_write", {"path": "a", "content": "x"}),
                 ("fs_read", {"path": "b"}),
                 ("fs_edit", {"path": "missing.txt", "old": "a", "new": "b"}),
                 ("shell_output", {"id": "nope"}))
    framework, _ = build_builtin(workspace, [turn, {"text": "done"}], Policy())
    async with framework.running():
        await framework.process_inbound({"content": "go", "session_id": SESSION})
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    records = [record for entry in entries if entry.kind == "tool_result"
               for record in entry.payload["results"]]
    by_name = {record["name"]: record for record in records}

    shell = by_name["shell"]
    assert shell["outcome"] == "ran"
    assert shell["arguments"] == {"command": "echo rewritten"}
    assert shell["requested_arguments"] == {"command": "echo as the model asked"}
    assert "rewritten" in shell["output"]
    assert not (workspace / "a").exists()
    denied = by_name["fs_write"]
    assert denied["outcome"] == "denied" and denied["error"] == "writes are not allowed here"
    assert "requested_arguments" not in denied
    assert by_name["fs_read"]["outcome"] == "replaced"
    assert by_name["fs_read"]["output"] == "canned contents"
    assert by_name["fs_edit"]["outcome"] == "failed" and by_name["fs_edit"]["error"]
    assert by_name["shell_output"]["outcome"] == "failed"

    assert tool_notes(records) == [
        '[tool] shell ran with {"command": "echo rewritten"} '
        '(rewritten before it ran: your edit or a plugin)',
        "[tool] fs_write denied: writes are not allowed here",
        "[tool] fs_read not run: a plugin gave its result",
        f"[tool] fs_edit failed: {by_name['fs_edit']['error']}",
        f"[tool] shell_output failed: {by_name['shell_output']['error']}",
    ]


def test_notes_say_only_what_happened_and_escape_control_characters() -> None:
    replaced = {"name": "fs_read", "outcome": "replaced", "arguments": {"path": "b"},
                "requested_arguments": {"path": "a"}}
    assert tool_notes([replaced]) == ["[tool] fs_read not run: a plugin gave its result"]
    hostile = {"name": "fs_edit", "outcome": "failed", "arguments": {},
               "error": "no such file: evil\x1b]0;pwned\x07.txt"}
    (note,) = tool_notes([hostile])
    assert "\x1b" not in note and "\x07" not in note
    assert note == "[tool] fs_edit failed: no such file: evil\\x1b]0;pwned\\x07.txt"


def test_hookline_run_stream_shows_the_denial_and_the_rewrite(tmp_path: Path) -> None:
    script = textwrap.dedent(f'''
        import sys
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[2])!r}]
        from hookline.cli.app import create_app
        from hookline.kernel.framework.core import Framework
        from test_what_ran import Policy
        framework = Framework(workspace={str(tmp_path)!r})
        framework.load_hooks()
        framework.registry.register(Policy(), name="policy")
        create_app(framework)(sys.argv[1:])
    ''')
    env = {**os.environ, "HOOKLINE_HOME": str(tmp_path / "home")}
    env.pop("HOOKLINE_MODEL", None)
    shown = []
    for message in ('/tool shell {"command": "echo as the model asked"}',
                    '/tool fs_write {"path": "a", "content": "x"}'):
        done = subprocess.run([sys.executable, "-c", script, "run", "--stream", message],
                              capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=60)
        shown.append(done.stderr)
        assert "[tool]" not in done.stdout, "stdout stays the reply alone"
    assert '[tool] shell {"command": "echo as the model asked"}' in shown[0]
    assert ('[tool] shell ran with {"command": "echo rewritten"} '
            '(rewritten before it ran: your edit or a plugin)') in shown[0]
    assert "[tool] fs_write denied: writes are not allowed here" in shown[1]
    assert not (tmp_path / "a").exists()
