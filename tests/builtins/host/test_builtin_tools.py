"""The builtin tools: schemas, argument checking, shell (foreground and background) and
file tools, and which environment they use."""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from procs import is_gone, pids_while_running

from hookline.builtins.host import tools as tools_module
from hookline.builtins.host.background import BackgroundProcesses
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.host.tools import builtin_tools
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tools import Tool, ToolContext

pytestmark = pytest.mark.skipif(os.name != "posix", reason="shell tools need a POSIX shell")

NAMES = ["shell", "shell.output", "shell.stop", "fs.read", "fs.write", "fs.edit"]


def by_name(processes: BackgroundProcesses | None = None) -> dict[str, Tool]:
    return {tool.name: tool for tool in builtin_tools(processes)}


def context_for(workspace: Path, **extra: Any) -> ToolContext:
    return ToolContext(state={"_runtime_workspace": str(workspace), **extra})


async def call(
    tool: str, workspace: Path, processes: BackgroundProcesses | None = None, **arguments: Any
) -> str:
    return await by_name(processes)[tool].invoke(arguments, context_for(workspace))


async def fails(
    tool: str, workspace: Path, processes: BackgroundProcesses | None = None, **arguments: Any
) -> HooklineError:
    with pytest.raises(HooklineError) as caught:
        await call(tool, workspace, processes, **arguments)
    return caught.value


# -- the tool list -----------------------------------------------------------------------


def test_tools_have_names_schemas_and_take_the_context() -> None:
    tools = builtin_tools(None)
    assert [tool.name for tool in tools] == NAMES
    for tool in tools:
        assert tool.context
        assert tool.description
        schema = tool.parameters
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])
        for prop in schema["properties"].values():
            assert prop["type"] in ("string", "integer", "boolean")
            assert prop.get("description")
    assert by_name()["shell"].parameters["required"] == ["command"]
    assert by_name()["fs.edit"].parameters["required"] == ["path", "old", "new"]
    assert [tool.model_name for tool in tools][1] == "shell_output"


# -- argument checking -------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "arguments", "fragment"),
    [
        ("shell", {}, "shell: missing required argument 'command'"),
        ("shell", {"command": 5}, "shell: 'command' must be a string, got integer 5"),
        ("shell", {"command": "ls", "timeout": "5"}, "'timeout' must be an integer, got string"),
        ("shell", {"command": "ls", "timeout": 1.5}, "'timeout' must be an integer, got number"),
        ("shell", {"command": "ls", "timeout": True}, "'timeout' must be an integer, got boolean"),
        ("shell", {"command": "ls", "timeout": 0}, "'timeout' must be at least 1, got 0"),
        ("shell", {"command": "ls", "background": "yes"}, "'background' must be a boolean"),
        ("shell", {"command": "ls", "cwd": "/"}, "unknown argument 'cwd' (expected: command, "),
        ("shell", {"command": "   "}, "shell: 'command' is empty"),
        ("shell", {"command": None}, "'command' must be a string, got null"),
        ("shell.output", {}, "shell.output: missing required argument 'id'"),
        ("shell.stop", {"id": 3}, "shell.stop: 'id' must be a string"),
        ("fs.read", {"path": "a", "offset": 0}, "fs.read: 'offset' must be at least 1"),
        ("fs.read", {"path": "a", "limit": -2}, "'limit' must be at least 1, got -2"),
        ("fs.write", {"path": "a"}, "fs.write: missing required argument 'content'"),
        ("fs.write", {"path": ["a"], "content": ""}, "'path' must be a string, got array"),
        ("fs.edit", {"path": "a", "old": "x"}, "fs.edit: missing required argument 'new'"),
        (
            "fs.edit",
            {"path": "a", "old": "x", "new": "y", "replace_all": 1},
            "'replace_all' must be a boolean, got integer 1",
        ),
    ],
)
async def test_bad_arguments_are_invalid_input(
    tmp_path: Path, tool: str, arguments: dict[str, Any], fragment: str
) -> None:
    error = await fails(tool, tmp_path, **arguments)
    assert error.kind is ErrorKind.invalid_input
    assert fragment in error.message
    assert error.details is not None and error.details["tool"] == tool


# -- shell -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_shell_reports_exit_code_and_streams(tmp_path: Path) -> None:
    assert await call("shell", tmp_path, command="echo hello") == (
        "exit code: 0\n--- stdout ---\nhello"
    )
    text = await call("shell", tmp_path, command="echo out; echo err >&2; exit 2")
    assert text == "exit code: 2\n--- stdout ---\nout\n--- stderr ---\nerr"
    assert await call("shell", tmp_path, command="true") == "exit code: 0\n(no output)"
    assert (await call("shell", tmp_path, command="pwd")).endswith(str(tmp_path.resolve()))


@pytest.mark.anyio
async def test_shell_timeout_kills_and_says_so(tmp_path: Path) -> None:
    text, [child] = await pids_while_running(lambda: call(
        "shell", tmp_path, command="sleep 60 & echo $! > child.pid; wait", timeout=1
    ), tmp_path / "child.pid")
    assert text.startswith("[timed out after 1 s: the command and the processes it started")
    assert "exit code: -9" in text
    with anyio.fail_after(5):
        while not is_gone(child):
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_shell_notes_truncated_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools_module, "MAX_OUTPUT", 10)
    text = await call("shell", tmp_path, command="seq 1 1000")
    assert text.startswith("exit code: 0\n--- stdout ---\n1\n2\n3\n4\n5")
    assert text.endswith("[output truncated: only the first 10 bytes of each stream are kept]")


@pytest.mark.anyio
async def test_background_shell_output_and_stop(tmp_path: Path) -> None:
    processes = BackgroundProcesses(stop_grace=0.5)
    async with asynccontextmanager(processes.lifespan)():
        text = await call(
            "shell", tmp_path, processes, command="echo ready; exec sleep 60", background=True
        )
        assert text.startswith("started background process bg1 (pid ")
        [info] = processes.list()
        assert info.cwd == str(tmp_path.resolve())

        with anyio.fail_after(5):
            while "ready" not in await processes.output("bg1"):
                await anyio.sleep(0.02)
        output = await call("shell.output", tmp_path, processes, id="bg1")
        assert output.startswith(f"bg1 pid {info.pid} running: echo ready; exec sleep 60")
        assert output.endswith("--- output ---\nready\n")

        stopped = await call("shell.stop", tmp_path, processes, id="bg1")
        assert stopped.startswith(f"bg1 pid {info.pid} stopped (exit status -15)")
        assert is_gone(info.pid)

        error = await fails("shell.output", tmp_path, processes, id="bg7")
        assert error.kind is ErrorKind.not_found
        assert "no background process 'bg7' in this session (known: bg1)" in error.message
    assert is_gone(info.pid)


@pytest.mark.anyio
async def test_a_session_sees_and_stops_only_its_own_background_processes(
        tmp_path: Path) -> None:
    """The registry is the process's, shared by every session of the gateway: one session's
    model cannot read another's server output, learn its ids or stop it."""
    processes = BackgroundProcesses(stop_grace=0.5)
    tools = by_name(processes)

    async def invoke(session: str, tool: str, **arguments: Any) -> str:
        return await tools[tool].invoke(arguments, context_for(tmp_path, session_id=session))

    async with asynccontextmanager(processes.lifespan)():
        await invoke("alice", "shell", command="echo alice-secret; exec sleep 60",
                     background=True)
        with anyio.fail_after(5):
            while "alice-secret" not in await processes.output("bg1"):
                await anyio.sleep(0.02)
        for tool in ("shell.output", "shell.stop"):
            with pytest.raises(HooklineError) as caught:
                await invoke("mallory", tool, id="bg1")
            assert caught.value.kind is ErrorKind.not_found
            assert "no background process 'bg1' in this session (known: none)" in (
                caught.value.message)
        [info] = processes.list()
        assert info.stopped is False and not is_gone(info.pid)
        assert "alice-secret" in await invoke("alice", "shell.output", id="bg1")
    assert is_gone(info.pid)


@pytest.mark.anyio
async def test_background_shell_needs_the_registry_and_the_scope(tmp_path: Path) -> None:
    for tool, arguments in [
        ("shell", {"command": "sleep 1", "background": True}),
        ("shell.output", {"id": "bg1"}),
        ("shell.stop", {"id": "bg1"}),
    ]:
        error = await fails(tool, tmp_path, None, **arguments)
        assert error.kind is ErrorKind.config
        assert "no BackgroundProcesses registry" in error.message
    error = await fails(
        "shell", tmp_path, BackgroundProcesses(), command="sleep 1", background=True
    )
    assert error.kind is ErrorKind.config
    assert "inside framework.running()" in error.message


# -- files -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_write_then_read(tmp_path: Path) -> None:
    text = await call("fs.write", tmp_path, path="dir/notes.txt", content="héllo\nworld\n")
    assert text == "wrote 13 bytes to 'dir/notes.txt'"
    assert (tmp_path / "dir/notes.txt").read_text(encoding="utf-8") == "héllo\nworld\n"
    assert await call("fs.read", tmp_path, path="dir/notes.txt") == "héllo\nworld\n"


@pytest.mark.anyio
async def test_read_with_offset_and_limit(tmp_path: Path) -> None:
    (tmp_path / "lines.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    assert await call("fs.read", tmp_path, path="lines.txt", offset=3, limit=2) == (
        "line 3\nline 4\n[lines 3-4 of 10 in 'lines.txt']"
    )
    assert await call("fs.read", tmp_path, path="lines.txt", offset=9) == (
        "line 9\nline 10\n[lines 9-10 of 10 in 'lines.txt']"
    )
    assert await call("fs.read", tmp_path, path="lines.txt", limit=1) == (
        "line 1\n[lines 1-1 of 10 in 'lines.txt']"
    )
    # A null optional argument counts as left out.
    assert (await call("fs.read", tmp_path, path="lines.txt", offset=None)).startswith("line 1")
    error = await fails("fs.read", tmp_path, path="lines.txt", offset=11)
    assert error.kind is ErrorKind.invalid_input
    assert "'offset' 11 is past the end of 'lines.txt', which has 10 line(s)" in error.message


@pytest.mark.anyio
async def test_read_of_an_empty_or_huge_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty.txt").write_text("")
    assert await call("fs.read", tmp_path, path="empty.txt") == "['empty.txt' is empty]"
    monkeypatch.setattr(tools_module, "MAX_READ_CHARS", 5)
    (tmp_path / "big.txt").write_text("abcdefghij")
    assert await call("fs.read", tmp_path, path="big.txt") == (
        "abcde\n[truncated at 5 characters in line 1, which is longer than that: fs.read shows "
        "no more of it; read the rest with the shell tool (sed -n 1p big.txt | cut -c 6-)]"
    )


@pytest.mark.anyio
async def test_file_errors_are_clear(tmp_path: Path) -> None:
    error = await fails("fs.read", tmp_path, path="missing.txt")
    assert (error.kind, error.message) == (
        ErrorKind.not_found,
        "cannot read 'missing.txt': no such file",
    )
    (tmp_path / "folder").mkdir()
    error = await fails("fs.read", tmp_path, path="folder")
    assert (error.kind, error.message) == (
        ErrorKind.invalid_input,
        "cannot read 'folder': it is a directory",
    )
    (tmp_path / "blob").write_bytes(b"ok\xff")
    error = await fails("fs.edit", tmp_path, path="blob", old="ok", new="ko")
    assert error.kind is ErrorKind.invalid_input
    assert error.message == "cannot edit 'blob': it is not UTF-8 text (byte 2)"
    assert (tmp_path / "blob").read_bytes() == b"ok\xff", "an edit never writes U+FFFD back"
    error = await fails("fs.write", tmp_path, path="blob/child.txt", content="x")
    assert error.kind is ErrorKind.invalid_input
    assert "a parent of it is a file" in error.message


@pytest.mark.anyio
async def test_paths_outside_the_workspace_are_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    (workspace / "link").symlink_to(tmp_path / "secret.txt")
    for tool, arguments in [
        ("fs.read", {"path": "../secret.txt"}),
        ("fs.read", {"path": str(tmp_path / "secret.txt")}),
        ("fs.read", {"path": "link"}),
        ("fs.write", {"path": "../new.txt", "content": "x"}),
        ("fs.edit", {"path": "link", "old": "secret", "new": "leaked"}),
    ]:
        error = await fails(tool, workspace, **arguments)
        assert error.kind is ErrorKind.invalid_input
        assert "outside the workspace" in error.message
        assert repr(arguments["path"]) in error.message
    assert (tmp_path / "secret.txt").read_text() == "secret"
    assert not (tmp_path / "new.txt").exists()


@pytest.mark.anyio
async def test_edit_replaces_exactly_one_occurrence(tmp_path: Path) -> None:
    (tmp_path / "code.py").write_text("a = 1\nb = 2\r\n")
    text = await call("fs.edit", tmp_path, path="code.py", old="b = 2", new="b = 3")
    assert text == "replaced 1 occurrence in 'code.py'"
    assert (tmp_path / "code.py").read_bytes() == b"a = 1\nb = 3\r\n"  # endings untouched


@pytest.mark.anyio
async def test_edit_ambiguity_and_replace_all(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x x x")
    error = await fails("fs.edit", tmp_path, path="f.txt", old="x", new="y")
    assert error.kind is ErrorKind.invalid_input
    assert "'old' text occurs 3 times in 'f.txt'" in error.message
    assert "replace_all" in error.message
    assert (tmp_path / "f.txt").read_text() == "x x x"
    text = await call("fs.edit", tmp_path, path="f.txt", old="x", new="y", replace_all=True)
    assert text == "replaced 3 occurrences in 'f.txt'"
    assert (tmp_path / "f.txt").read_text() == "y y y"


@pytest.mark.anyio
async def test_edit_errors(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("def main():\n    return 1\n")
    error = await fails("fs.edit", tmp_path, path="f.txt", old="return 2", new="x")
    assert error.kind is ErrorKind.invalid_input
    assert error.message == (
        "fs.edit: 'old' text not found in 'f.txt'; read the file and copy the text exactly"
    )
    error = await fails("fs.edit", tmp_path, path="f.txt", old="  return 1  \n\n", new="x")
    assert "it occurs with different leading or trailing whitespace" in error.message
    error = await fails("fs.edit", tmp_path, path="f.txt", old="", new="x")
    assert "'old' is empty" in error.message
    error = await fails("fs.edit", tmp_path, path="nope.txt", old="a", new="b")
    assert (error.kind, error.message) == (
        ErrorKind.not_found,
        "cannot edit 'nope.txt': no such file",
    )


# -- which environment -------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_state_environment_wins_over_the_workspace(tmp_path: Path) -> None:
    state_root = tmp_path / "from-state"
    fallback_root = tmp_path / "fallback"
    state_root.mkdir()
    fallback_root.mkdir()

    class Recording(LocalEnvironment):
        def __init__(self, workspace: Path) -> None:
            super().__init__(workspace)
            self.calls: list[str] = []

        async def write_text(self, path, content):  # type: ignore[override]
            self.calls.append(f"write {path}")
            await super().write_text(path, content)

    environment = Recording(state_root)
    context = ToolContext(
        state={
            "_runtime_workspace": str(fallback_root),
            "_runtime_environment": environment,
        }
    )
    await by_name()["fs.write"].invoke({"path": "a.txt", "content": "x"}, context)
    assert environment.calls == ["write a.txt"]
    assert (state_root / "a.txt").exists()
    assert not (fallback_root / "a.txt").exists()
    text = await by_name()["shell"].invoke({"command": "pwd"}, context)
    assert text.endswith(str(state_root.resolve()))


@pytest.mark.anyio
async def test_without_environment_or_workspace_tools_explain(tmp_path: Path) -> None:
    with pytest.raises(HooklineError, match="neither _runtime_environment nor") as caught:
        await by_name()["fs.read"].invoke({"path": "a"}, ToolContext())
    assert caught.value.kind is ErrorKind.config
    bad = ToolContext(state={"_runtime_environment": "not an environment"})
    with pytest.raises(HooklineError, match="must be an Environment"):
        await by_name()["fs.read"].invoke({"path": "a"}, bad)
