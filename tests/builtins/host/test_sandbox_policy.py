"""The sandbox of `LocalEnvironment`: background shells, the layers a system may lack, the
layout check, the environment policy and the ruleset's refresh, under asyncio and trio."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from procs import host_pid, read_pids, wait_gone
from sandbox_support import REFUSED, environment

from hookline.builtins.host import sandbox
from hookline.builtins.host.background import BackgroundProcesses
from hookline.builtins.host.processes import open_local_process
from hookline.builtins.host.sandbox import SandboxPolicy
from hookline.builtins.host.toolenv import EnvironmentPolicy
from hookline.kernel.errors import ErrorKind, HooklineError


@pytest.mark.anyio
async def test_a_background_shell_is_confined_too(layout: tuple[Path, Path, Path]) -> None:
    workspace, home, outside = layout
    processes = BackgroundProcesses(stop_grace=0.5)
    async with asynccontextmanager(processes.lifespan)():
        env = environment(workspace, home, processes)
        process_id = await env.start_background(
            f"touch inside; touch {outside}/escape; cat {home}/secret; echo finished")
        with anyio.fail_after(20):
            while "finished" not in (output := await processes.output(process_id)):
                await anyio.sleep(0.02)
        await env.close()
    assert (workspace / "inside").exists() and not (outside / "escape").exists()
    assert sum(output.count(word) for word in REFUSED) == 2 and "the secret" not in output


@pytest.mark.anyio
async def test_the_shell_tools_background_command_is_confined_and_filtered(
        layout: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`shell` with `background: true` goes through the environment's sandbox: no secret
    of hookline's environment, no file outside the workspace, no_new_privs set."""
    from hookline.builtins.host import builtin_tools
    from hookline.kernel.tools import ToolContext

    workspace, home, outside = layout
    monkeypatch.setenv("HOOKLINE_TEST_SECRET_TOKEN", "s3cret-value")
    processes = BackgroundProcesses(stop_grace=0.5)
    async with asynccontextmanager(processes.lifespan)():
        env = environment(workspace, home, processes)
        tools = {tool.name: tool for tool in builtin_tools(processes)}
        context = ToolContext(state={"_runtime_environment": env})
        await tools["shell"].invoke({"command": (
            f"echo token=$HOOKLINE_TEST_SECRET_TOKEN; grep NoNewPrivs /proc/self/status; "
            f"touch {outside}/escape; cat {home}/secret; echo finished"),
            "background": True}, context)
        with anyio.fail_after(20):
            while "finished" not in (output := await processes.output("bg1")):
                await anyio.sleep(0.02)
        await env.close()
    assert "token=\n" in output and "s3cret-value" not in output
    assert "NoNewPrivs:\t1" in output
    assert not (outside / "escape").exists() and "the secret" not in output


@pytest.mark.anyio
async def test_a_helper_killed_is_replaced_at_the_next_command_and_said(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """Out of memory the kernel may end the helper itself (its score is its commands'):
    the session's next command gets a new sandbox, not a broken pipe."""
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        await env.run("true")
        helper = host_pid(1)  # the first process of the session's pid namespace
        os.kill(helper, signal.SIGKILL)
        assert await wait_gone([helper]) == []
        after = await env.run("echo again")
    finally:
        await env.close()
    assert after.stdout == "again\n", after.stderr
    said = [r.getMessage() for r in caplog.records if "sandbox of this session ended" in
            r.getMessage()]
    assert len(said) == 1, said


@pytest.mark.anyio
async def test_a_sandbox_dropped_unclosed_ends_with_its_last_reference(
        layout: tuple[Path, Path, Path]) -> None:
    """Without the cyclic collector: nothing of a session's sandbox (the watch of what
    commands made included) holds it in a cycle that would keep its commands running."""
    workspace, home, _ = layout
    env = environment(workspace, home)
    await env.run("setsid sleep 300 > /dev/null 2>&1 & echo $! > sleeper.pid")
    [pid] = await read_pids(workspace / "sleeper.pid", 1)
    gc.disable()
    try:
        del env
        assert await wait_gone([pid], timeout=10) == []
    finally:
        gc.enable()


@pytest.mark.anyio
@pytest.mark.parametrize("without", [(), ("namespaces",), ("seccomp",), ("landlock",)])
async def test_a_spawned_command_is_confined_with_each_layer_missing(
    layout: tuple[Path, Path, Path], without: tuple[str, ...], caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each layer a system may lack, simulated: the others still hold, and the missing one
    is said once, with what it leaves open."""
    workspace, home, outside = layout
    monkeypatch.setattr(sandbox, "WARNED", set())  # said once per process: this is one
    env = environment(workspace, home, without=without)
    try:
        result = await env.run(f"cat {home}/secret; touch {outside}/x; touch ok; "
                               f"echo data > $TMPDIR/t && echo $TMPDIR")
    finally:
        await env.close()
    assert sum(result.stderr.count(word) for word in REFUSED) == 2, result.stderr
    assert (workspace / "ok").exists() and not (outside / "x").exists()
    temporary = result.stdout.strip()
    assert os.path.basename(temporary).startswith("hookline-tool-")
    assert not os.path.exists(temporary), "close() removes the private temporary folder"
    warned = [r.getMessage() for r in caplog.records if "sandbox is weaker" in r.getMessage()]
    assert bool(warned) == bool(without)
    for name in without:
        assert all(f"{name}: turned off" in line for line in warned)
    assert len(warned) <= 1
    second = environment(workspace, home, without=without)  # another session: not again
    try:
        await second.run("true")
    finally:
        await second.close()
    again = [r.getMessage() for r in caplog.records if "sandbox is weaker" in r.getMessage()]
    assert again == warned


@pytest.mark.anyio
@pytest.mark.parametrize("without", [("namespaces", "landlock"), ("namespaces", "seccomp")])
async def test_too_few_layers_refuse_the_shell_with_one_line(
    layout: tuple[Path, Path, Path], without: tuple[str, ...]
) -> None:
    workspace, home, _ = layout
    env = environment(workspace, home, without=without)
    with pytest.raises(HooklineError) as caught:
        await env.run("touch never")
    await env.close()
    assert caught.value.kind is ErrorKind.config
    message = caught.value.message
    assert "\n" not in message and "turned off" in message
    assert 'sandbox = "off"' in message and "Nothing was run" in message
    assert not (workspace / "never").exists()


@pytest.mark.anyio
async def test_entries_created_beside_the_home_are_granted_on_the_next_command(
    tmp_path: Path,
) -> None:
    """Without namespaces, the ruleset names each entry beside the hidden home; a new one
    needs a new rule (a new helper)."""
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    env = environment(workspace, home, without=("namespaces",))
    try:
        assert (await env.run("true")).returncode == 0
        (tmp_path / "later.txt").write_text("readable")
        result = await env.run(f"cat {tmp_path}/later.txt")
    finally:
        await env.close()
    assert result.stdout == "readable", result.stderr


@pytest.mark.anyio
@pytest.mark.parametrize("without", [(), ("namespaces",)], ids=["namespaces", "fallback"])
async def test_a_credential_made_after_the_sandbox_started_is_hidden_too(
        layout: tuple[Path, Path, Path], without: tuple[str, ...]) -> None:
    """A mask covers what exists: `aws configure` run while a chat is open makes a file
    no mask covers. A running command cannot read it (nor anything else new beside it,
    until the next command's helper has a rule for it); the next command has it masked."""
    workspace, home, outside = layout
    user = outside / "user"
    (user / ".ssh").mkdir(parents=True)
    env = environment(workspace, home, without=without,
                      deny_read=(str(user / ".ssh"), str(user / ".aws")))
    command = (f"while [ ! -e ready ]; do sleep 0.02; done; cat {user}/.aws/credentials; "
               f"cat {user}/later.txt")
    try:
        async with anyio.create_task_group() as group:
            results = []

            async def run() -> None:
                results.append(await env.run(command))

            group.start_soon(run)
            await anyio.sleep(0.3)  # the helper started before the credential was made
            (user / ".aws").mkdir()
            (user / ".aws" / "credentials").write_text("AWSSECRET")
            (user / "later.txt").write_text("readable")
            (workspace / "ready").touch()
        after = await env.run(command)
    finally:
        await env.close()
    assert "AWSSECRET" not in results[0].stdout, results[0].stdout
    assert results[0].stderr.count("Permission denied") == 2, results[0].stderr
    assert after.stdout == "readable", after.stderr
    assert "AWSSECRET" not in after.stdout and "credentials" in after.stderr


@pytest.mark.anyio
async def test_a_credential_that_became_a_link_is_hidden_where_it_points(
        layout: tuple[Path, Path, Path]) -> None:
    """`~/.ssh` made a link to `~/dotfiles/ssh` (stow) while a session runs: from its
    next command on, what the link leads to is hidden."""
    workspace, home, outside = layout
    user = outside / "user"
    (user / "dotfiles" / "ssh").mkdir(parents=True)
    (user / "dotfiles" / "ssh" / "id").write_text("SSH-PRIVATE-KEY")
    env = environment(workspace, home, deny_read=(str(user / ".ssh"),))
    command = f"cat {user}/.ssh/id {user}/dotfiles/ssh/id"
    try:
        before = await env.run(f"cat {user}/dotfiles/ssh/id")
        (user / ".ssh").symlink_to("dotfiles/ssh")
        after = await env.run(command)
    finally:
        await env.close()
    assert before.stdout == "SSH-PRIVATE-KEY", "not a credential until the link names it"
    assert "SSH-PRIVATE-KEY" not in after.stdout
    assert after.stderr.count("Permission denied") == 2, after.stderr


ATTACH = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
address = libc.shmat(int(sys.argv[1]), None, 0o10000)  # SHM_RDONLY
print(ctypes.string_at(address, 10).decode() if address not in (None, 2**64 - 1)
      else f"refused {ctypes.get_errno()}")
"""


@pytest.mark.anyio
@pytest.mark.parametrize("without", [(), ("namespaces",)], ids=["namespaces", "fallback"])
async def test_the_host_s_shared_memory_cannot_be_attached(
        layout: tuple[Path, Path, Path], without: tuple[str, ...]) -> None:
    """A segment of the user's (an X server's images, say) is listed with its id in
    /proc/sysvipc/shm: a command attaches none, in its own IPC namespace or, without
    namespaces, under the seccomp filter."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    assert segment >= 0, ctypes.get_errno()
    address = libc.shmat(segment, None, 0)
    try:
        ctypes.memmove(address, b"the secret", 10)
        workspace, home, _ = layout
        (workspace / "attach.py").write_text(ATTACH)
        env = environment(workspace, home, without=without)
        try:
            result = await env.run(f"python3 attach.py {segment}")
        finally:
            await env.close()
    finally:
        libc.shmdt(ctypes.c_void_p(address))
        libc.shmctl(segment, 0, None)  # IPC_RMID
    assert "the secret" not in result.stdout and "refused" in result.stdout, result.stderr


@pytest.mark.anyio
async def test_off_runs_unconfined_but_still_filters_the_environment(
    layout: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, home, _ = layout
    monkeypatch.setenv("SERVICE_API_KEY", "sk-never-shown")
    env = environment(workspace, home, mode="off")
    try:
        result = await env.run(f"cat {home}/secret; env")
    finally:
        await env.close()
    assert "the secret" in result.stdout and "sk-never-shown" not in result.stdout


def test_the_environment_policy() -> None:
    environ = {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "EDITOR": "vi",
        "HOOKLINE_HOME": "/h", "OPENAI_API_KEY": "k", "openai_api_key": "k", "PGHOST": "db",
        "SSH_AUTH_SOCK": "/s", "AWS_PROFILE": "p", "MY_SECRET_THING": "s",
        "PROXY_URL": "http://user:pw@proxy:3128", "PLAIN_URL": "https://example.org/a@b",
        "DB_PASS": "p", "MY_APP_PW": "p", "CI_JOB_JWT": "j", "PWD": "/home/u/work",
        "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/S",
        "GIT_REMOTE_URL": "https://ghp_0123456789abcdef@github.com/o/r",
        "DB_CONN": "Server=db;Password=Secr3t;", "APP_URL": "postgres://db/a?password=pw",
        "EMAIL": "me@example.org", "BYPASS_LIST": "localhost",
    }
    kept = EnvironmentPolicy().apply(environ)
    assert sorted(kept) == ["BYPASS_LIST", "EDITOR", "EMAIL", "HOME", "LANG", "PATH",
                            "PLAIN_URL", "PWD"]
    assert "PGHOST" in EnvironmentPolicy(keep=("pg*",)).apply(environ)
    assert "EDITOR" not in EnvironmentPolicy(drop=("EDIT*",)).apply(environ)
    assert EnvironmentPolicy(inherit=True).apply(environ) == environ


def test_policy_warnings() -> None:
    assert SandboxPolicy().warnings() == []
    assert "OFF" in SandboxPolicy(mode="off").warnings()[0]
    assert "network" in SandboxPolicy(network=True).warnings()[0]
    assert "inherit" in SandboxPolicy(environment=EnvironmentPolicy(inherit=True)).warnings()[0]
    [opened] = SandboxPolicy(protect=(".vscode", ".idea", "Makefile")).warnings()
    assert opened.startswith("commands may change .zed, .helix, .devcontainer, .devcontainer.json")
    assert "Makefile" not in opened and ".idea" not in opened and ".opencode" in opened
    assert SandboxPolicy(protect=(), mode="read-only").warnings() == []  # nothing is written


@pytest.mark.anyio
async def test_a_helper_handed_out_is_kept_until_its_command_started(tmp_path: Path) -> None:
    """A command is handed a helper, then, before it starts, another command finds the
    watched folder changed and gets a new one: the first helper is not closed under it."""
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    env = environment(workspace, home, without=("namespaces",))
    confinement = env._confinement
    try:
        environ, first = await anyio.to_thread.run_sync(confinement.prepare)
        (tmp_path / "beside").write_text("x")  # changes the watched folder: a new helper
        _environ, second = await anyio.to_thread.run_sync(confinement.prepare)
        assert second is not first
        process = await open_local_process(f"echo kept > {workspace / 'ran'}", cwd=workspace,
                                           environ=environ, spawner=first,
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
        first.release()
        second.release()
        assert await process.wait() == 0
    finally:
        await env.close()
    assert (workspace / "ran").read_text() == "kept\n"


@pytest.mark.anyio
async def test_a_helper_handed_out_for_a_start_that_failed_is_idle_again(
        tmp_path: Path) -> None:
    """A background start refused after the helper was handed out (its registry's scope
    is not open) gives it back: replaced later, it is closed, not kept to the end."""
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    env = environment(workspace, home, without=("namespaces",))
    try:
        with pytest.raises(HooklineError, match="only be started inside"):
            await env.start_background("sleep 5", registry=BackgroundProcesses())
        spawner = env._confinement._spawner
        assert spawner is not None and spawner.idle()
    finally:
        await env.close()


@pytest.mark.anyio
async def test_commands_started_while_the_ruleset_is_rebuilt_all_run(tmp_path: Path) -> None:
    """A folder beside the home changes between commands started together: each command
    still runs (a replaced helper in use is kept, never closed under it)."""
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    env = environment(workspace, home, without=("namespaces",))
    codes: list[int | None] = []

    async def one(n: int) -> None:
        (tmp_path / f"beside-{n}").write_text("x")  # changes the watched folder
        codes.append((await env.run(f"echo {n} >> ran")).returncode)

    try:
        async with anyio.create_task_group() as group:
            for n in range(12):
                group.start_soon(one, n)
    finally:
        await env.close()
    assert codes == [0] * 12
    assert len((workspace / "ran").read_text().split()) == 12


@pytest.mark.anyio
async def test_a_workspace_inside_the_home_is_refused_in_every_confined_mode(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    workspace = home / "project"
    workspace.mkdir(parents=True)
    for mode in ("workspace-write", "read-only"):
        env = environment(workspace, home, mode=mode)
        with pytest.raises(HooklineError, match="are one inside the other") as caught:
            await env.run("true")
        await env.close()
        assert "read-only" not in caught.value.message, "read-only would not help here"
    inside = environment(tmp_path, tmp_path / "home", mode="read-only")
    try:
        assert (await inside.run("true")).returncode == 0, "read-only hides a home inside"
    finally:
        await inside.close()


@pytest.mark.anyio
async def test_tmp_is_read_only_and_other_sessions_folders_are_not_there(
    tmp_path: Path, layout: tuple[Path, Path, Path]
) -> None:
    """The host's /tmp stays readable (programs and checkouts live there), not writable;
    of hookline's private folders a command sees its own session's only."""
    workspace, home, _ = layout
    (tmp_path / "beside.txt").write_text("readable")
    first, second = environment(workspace, home), environment(workspace, home)
    try:
        mine = (await first.run('echo a-secret > "$TMPDIR/a"; echo "$TMPDIR"')).stdout.strip()
        result = await second.run(f"cat {tmp_path}/beside.txt; cat {mine}/a; "
                                  f"ls $(dirname $TMPDIR); touch {tmp_path}/new")
    finally:
        await first.close()
        await second.close()
    assert result.stdout.startswith("readable"), result.stderr
    assert "a-secret" not in result.stdout and os.path.basename(mine) not in result.stdout
    assert "Read-only file system" in result.stderr and not (tmp_path / "new").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("without", [(), ("namespaces",)], ids=["mounts", "landlock-only"])
async def test_sockets_in_tmp_are_masked_while_the_network_is_closed(
    layout: tuple[Path, Path, Path], without: tuple[str, ...]
) -> None:
    """An agent's socket in /tmp (ssh-agent, tmux, X11 keep theirs there) is no way out.
    Without mounts to mask them, no Unix socket is opened at all (a pair still is)."""
    workspace, home, _ = layout
    folder = Path(tempfile.mkdtemp(prefix="ssh-", dir="/tmp"))  # where ssh-agent keeps one
    path = folder / f"agent.{os.getpid()}"
    agent = socket.socket(socket.AF_UNIX)
    agent.bind(str(path))
    agent.listen(1)
    connect = ("python3 -c \"import socket, sys; s = socket.socket(socket.AF_UNIX); "
               f"s.connect('{path}'); print('connected')\"")
    closed = environment(workspace, home, without=without)
    open_ = environment(workspace, home, network=True, without=without)
    try:
        refused = await closed.run(connect)
        reached = await open_.run(connect)
        pair = await closed.run("python3 -c \"import socket; socket.socketpair(); print('pair')\"")
    finally:
        await closed.close()
        await open_.close()
        agent.close()
        shutil.rmtree(folder)
    assert "connected" not in refused.stdout and refused.returncode != 0
    assert "connected" in reached.stdout, reached.stderr  # the mask is for a closed network
    assert pair.stdout == "pair\n", pair.stderr


@pytest.mark.anyio
@pytest.mark.parametrize("place", ["in-tmp", "tmp"])
async def test_sockets_beside_a_workspace_in_tmp_are_masked_too(
    layout: tuple[Path, Path, Path], place: str
) -> None:
    """A workspace in a folder of /tmp, or /tmp itself: the host's sockets beside it (a
    service's in that folder, an agent's in a folder of its own) are masked as well."""
    _, home, _ = layout
    root = Path(tempfile.mkdtemp(prefix="hookline-beside-", dir="/tmp"))
    workspace = root / "workspace" if place == "in-tmp" else Path("/tmp")
    (root / "workspace").mkdir()
    (root / "agent").mkdir()
    note = workspace / f"{root.name}.txt"
    note.write_text("mine")
    listeners = []
    for path in (root / "service.sock", root / "agent" / "agent.1"):
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
        listener.listen(1)
        listeners.append(listener)
    connect = ("python3 -c \"import socket, sys; s = socket.socket(socket.AF_UNIX); "
               "s.connect(sys.argv[1]); print('connected')\" ")
    env = environment(workspace, home)
    try:
        reached = [await env.run(connect + str(path))
                   for path in (root / "service.sock", root / "agent" / "agent.1")]
        own = await env.run(f"cat {note}")
    finally:
        await env.close()
        for listener in listeners:
            listener.close()
        shutil.rmtree(root)
        note.unlink(missing_ok=True)
    for result in reached:
        assert "connected" not in result.stdout and result.returncode != 0, result
    assert own.stdout == "mine", own.stderr  # the workspace itself stays in reach


@pytest.mark.anyio
async def test_a_tmux_server_started_after_the_sandbox_is_out_of_its_reach(
    layout: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tmux makes its socket folder at its first start, which may come after the session's
    sandbox did (a chat left running all day); `tmux send-keys` would type into your
    shell. hookline makes that folder first (mode 0700, as tmux does), and masks it."""
    workspace, home, _ = layout
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))
    folder = tmp_path / f"tmux-{os.getuid()}"
    env = environment(workspace, home)
    server = socket.socket(socket.AF_UNIX)
    try:
        await env.run("true")  # the sandbox starts, before any tmux server
        folder.mkdir(mode=0o700, exist_ok=True)  # what tmux does at its first start
        server.bind(str(folder / "default"))
        server.listen(1)
        result = await env.run("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); "
                               f"s.connect('{folder}/default'); print('connected')\"")
    finally:
        await env.close()
        server.close()
    assert "connected" not in result.stdout and result.returncode != 0, result.stdout
    assert folder.stat().st_mode & 0o777 == 0o700


@pytest.mark.anyio
async def test_a_link_put_in_place_of_tmux_s_folder_is_not_followed(
    layout: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another local user who puts a link at `/tmp/tmux-<uid>` first cannot have the
    sandbox hide where it points (a folder of yours that commands read)."""
    workspace, home, outside = layout
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))
    (outside / "notes.txt").write_text("readable")
    (tmp_path / f"tmux-{os.getuid()}").symlink_to(outside)
    env = environment(workspace, home)
    try:
        result = await env.run(f"cat {outside}/notes.txt")
    finally:
        await env.close()
    assert result.stdout == "readable", result.stderr


@pytest.mark.anyio
async def test_a_folder_swapped_for_a_link_never_leads_the_file_tools_outside(
        layout: tuple[Path, Path, Path]) -> None:
    """The file tools run with the user's rights, outside the sandbox. A sandboxed
    command swaps a folder of the workspace for a link to an outside folder, over and
    over, while they read and write through it: once the path is resolved, no link on
    the way is followed, so nothing outside is read or written. (Before, 3,000 tries read
    the outside secret once and wrote 16 files outside.)"""
    workspace, home, outside = layout
    (workspace / "swap").mkdir()
    (workspace / "swap" / "secret.txt").write_text("inside")
    (outside / "secret.txt").write_text("OUTSIDE SECRET")
    processes = BackgroundProcesses(stop_grace=0.5)
    read: list[str] = []
    async with asynccontextmanager(processes.lifespan)():
        env = environment(workspace, home, processes)
        await env.start_background(f"while true; do mv swap real; ln -s {outside} swap; "
                                   f"rm swap; mv real swap; done")
        try:
            while not (workspace / "real").exists() and not (workspace / "swap").is_symlink():
                await anyio.sleep(0.01)
            for number in range(2000):
                with contextlib.suppress(HooklineError, OSError):
                    read.append(await env.read_text("swap/secret.txt"))
                with contextlib.suppress(HooklineError, OSError):
                    await env.write_text(f"swap/planted{number}.txt", "x")
        finally:
            await env.close()
    assert not any("OUTSIDE" in text for text in read)
    assert list(outside.glob("planted*")) == []
