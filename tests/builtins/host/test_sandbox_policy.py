"""The sandbox of `LocalEnvironment`: background shells, the layers a system may lack, the
layout check, the environment policy and the ruleset's refresh, under asyncio and trio."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from hookline.builtins.host import sandbox
from hookline.builtins.host.background import BackgroundProcesses
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.host.sandbox import SandboxPolicy
from hookline.builtins.host.toolenv import EnvironmentPolicy
from hookline.kernel.errors import ErrorKind, HooklineError


@pytest.fixture
def layout() -> Iterator[tuple[Path, Path, Path]]:
    """A workspace, a hidden hookline home holding a secret, and an outside folder (not
    under /tmp, which a sandboxed command sees replaced by its private folder)."""
    root = Path(tempfile.mkdtemp(prefix="hookline-policy-test-", dir="/var/tmp"))
    workspace, home, outside = (root / name for name in ("workspace", "home", "outside"))
    for folder in (workspace, home, outside):
        folder.mkdir()
    (home / "secret").write_text("the secret")
    try:
        yield workspace, home, outside
    finally:
        shutil.rmtree(root, ignore_errors=True)


REFUSED = ("Permission denied", "Read-only file system")


def environment(workspace: Path, home: Path, processes: BackgroundProcesses | None = None,
                **policy: object) -> LocalEnvironment:
    return LocalEnvironment(workspace, processes=processes,
                            sandbox=SandboxPolicy(hidden=(str(home),), **policy))  # type: ignore[arg-type]


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
async def test_a_nested_repository_is_protected_at_any_depth(
        layout: tuple[Path, Path, Path]) -> None:
    workspace, home, _ = layout
    nested = workspace / "deep" / "down" / "lib" / ".git"
    (nested / "hooks").mkdir(parents=True)
    (nested / "config").write_text("[core]\n")
    env = environment(workspace, home)
    try:
        result = await env.run("echo '[core] fsmonitor = evil' >> deep/down/lib/.git/config; "
                               "touch deep/down/lib/.git/hooks/pre-commit; touch deep/ok")
    finally:
        await env.close()
    assert result.stderr.count("Read-only file system") == 2, result.stderr
    assert (nested / "config").read_text() == "[core]\n"
    assert (workspace / "deep" / "ok").exists()


@pytest.mark.anyio
async def test_what_commands_made_of_the_protected_is_said_when_the_session_ends(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """A command may make a repository (or a protected path that was missing) and give it
    hooks in one go, before any helper could protect it: the user, who may run git there
    later, is told which."""
    workspace, home, _ = layout
    (workspace / "old" / ".git").mkdir(parents=True)
    env = environment(workspace, home, protect=(".vscode",))
    try:
        result = await env.run("git init -q made && mkdir -p a/b && git init -q a/b && "
                               "echo '[core] fsmonitor = evil' >> a/b/.git/config && "
                               "mkdir .vscode .hookline && echo ok")
        assert "ok" in result.stdout, result.stderr
    finally:
        await env.close()
    said = [r.getMessage() for r in caplog.records if "commands of this session made" in
            r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith("commands of this session made .hookline, .vscode, a/b/.git, "
                              "made/.git, which"), said[0]
    assert "look at them before you run git there" in said[0]


@pytest.mark.anyio
@pytest.mark.parametrize("in_place", [True, False], ids=["in-place", "new-helper"])
async def test_a_repository_said_made_is_protected_from_the_next_command(
        layout: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch,
        in_place: bool) -> None:
    """Where the running sandbox fails to protect it, the next command gets a new one."""
    from hookline.builtins.host.confined import Spawner

    if not in_place:
        monkeypatch.setattr(Spawner, "protect", lambda self, paths: False)
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        made = await env.run("git init -q made && echo '[core]' >> made/.git/config && echo ok")
        assert "ok" in made.stdout, made.stderr
        await env.say_what_commands_made()  # as the builtin plugin does after each run
        after = await env.run("echo '[core] fsmonitor = evil' >> made/.git/config; "
                              "touch made/file && echo still-writable")
    finally:
        await env.close()
    assert "Read-only file system" in after.stderr and "still-writable" in after.stdout
    assert "fsmonitor" not in (workspace / "made" / ".git" / "config").read_text()


@pytest.mark.anyio
async def test_a_repository_said_made_is_protected_in_place_from_running_commands_too(
        layout: tuple[Path, Path, Path]) -> None:
    """The running sandbox protects it: a command still running there can no longer
    change it, and what it started stays in sight of the next command (its pid
    namespace, its loopback)."""
    workspace, home, _ = layout
    config = workspace / "made" / ".git" / "config"
    processes = BackgroundProcesses(stop_grace=0.5)
    async with asynccontextmanager(processes.lifespan)():
        env = environment(workspace, home, processes)
        try:
            await env.start_background(
                "git init -q made && echo $$ > pid && "
                "while echo x >> made/.git/config 2>/dev/null; do sleep 0.02; done; "
                "echo refused > refused; sleep 60")
            with anyio.fail_after(20):
                while not (config.exists() and "x" in config.read_text()):
                    await anyio.sleep(0.02)
            await env.say_what_commands_made()  # as the builtin plugin does after each run
            with anyio.fail_after(10):
                while not (workspace / "refused").exists():
                    await anyio.sleep(0.02)
            written = config.read_text()
            after = await env.run("kill -0 $(cat pid) && echo still-seen; "
                                  "echo y >> made/.git/config")
        finally:
            await env.close()
    assert "still-seen" in after.stdout, after.stderr
    assert "Read-only file system" in after.stderr
    assert config.read_text() == written


@pytest.mark.anyio
async def test_a_link_swapped_in_for_a_repository_is_not_followed_when_protecting(
        layout: tuple[Path, Path, Path]) -> None:
    """A command may swap a link in between hookline's search and the mount: the
    running sandbox then says it failed (a new helper takes over) and protects nothing
    the link names."""
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        await env.run("mkdir elsewhere made && ln -s ../elsewhere made/.git")
        spawner = env._confinement._spawner
        assert spawner is not None and spawner.report.mounted
        protected = await anyio.to_thread.run_sync(
            spawner.protect, [str(workspace / "made" / ".git"), str(workspace / "gone")])
        refused = await env.run("touch elsewhere/writable")
        real = await anyio.to_thread.run_sync(spawner.protect, [str(workspace / "made")])
        after = await env.run("touch made/file elsewhere/still")
    finally:
        await env.close()
    assert protected is False and refused.returncode == 0, refused.stderr
    assert real is True and "Read-only file system" in after.stderr
    assert (workspace / "elsewhere" / "still").exists()
    assert not (workspace / "made" / "file").exists()


@pytest.mark.anyio
async def test_many_repositories_made_are_counted_past_the_first_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        await env.run("for n in $(seq 25); do mkdir -p r$n/.git; done")
    finally:
        await env.close()
    said = [r.getMessage() for r in caplog.records if "commands of this session made" in
            r.getMessage()]
    assert len(said) == 1 and said[0].count("/.git") == 20 and "and 5 more" in said[0], said


@pytest.mark.anyio
async def test_a_search_cut_short_is_said_once_with_the_fix(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace too large to look through: the repositories past the limit are not
    protected, and the user is told so once, with what to do."""
    workspace, home, _ = layout
    monkeypatch.setattr(sandbox, "MAX_SEARCHED", 5)
    for number in range(10):
        (workspace / f"file{number}").write_text("")
    (workspace / "sub" / "lib" / ".git").mkdir(parents=True)
    env = environment(workspace, home)
    try:
        for _ in range(2):
            result = await env.run("touch sub/lib/.git/config && echo written")
            assert "written" in result.stdout, result.stderr
            await env.close()  # the next command starts a new helper, which searches again
    finally:
        await env.close()
    said = [r.getMessage() for r in caplog.records if "were looked for" in r.getMessage()]
    assert len(said) == 1 and "more than 5 entries" in said[0], said
    assert "sandbox_protect" in said[0]


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
    }
    kept = EnvironmentPolicy().apply(environ)
    assert sorted(kept) == ["EDITOR", "HOME", "LANG", "PATH", "PLAIN_URL"]
    assert "PGHOST" in EnvironmentPolicy(keep=("pg*",)).apply(environ)
    assert "EDITOR" not in EnvironmentPolicy(drop=("EDIT*",)).apply(environ)
    assert EnvironmentPolicy(inherit=True).apply(environ) == environ


def test_policy_warnings() -> None:
    assert SandboxPolicy().warnings() == []
    assert "OFF" in SandboxPolicy(mode="off").warnings()[0]
    assert "network" in SandboxPolicy(network=True).warnings()[0]
    assert "inherit" in SandboxPolicy(environment=EnvironmentPolicy(inherit=True)).warnings()[0]


@pytest.mark.anyio
async def test_the_file_tools_refuse_the_hookline_home_inside_the_workspace(
    tmp_path: Path,
) -> None:
    home = tmp_path / ".hookline"
    home.mkdir()
    (home / "config.toml").write_text('api_key = "sk-in-home"\n')
    env = environment(tmp_path, home)
    for action in (env.read_text(".hookline/config.toml"),
                   env.write_text(".hookline/config.toml", "sandbox = 'off'\n")):
        with pytest.raises(HooklineError, match="is in the hookline home"):
            await action
    assert "sk-in-home" in (home / "config.toml").read_text()
    await env.write_text("notes.txt", "fine")  # the rest of the workspace is the tools'
    assert (tmp_path / "notes.txt").read_text() == "fine"


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
async def test_sockets_in_tmp_are_masked_while_the_network_is_closed(
    layout: tuple[Path, Path, Path],
) -> None:
    """An agent's socket in /tmp (ssh-agent, tmux, X11 keep theirs there) is no way out."""
    workspace, home, _ = layout
    folder = Path(tempfile.mkdtemp(prefix="ssh-", dir="/tmp"))  # where ssh-agent keeps one
    path = folder / f"agent.{os.getpid()}"
    agent = socket.socket(socket.AF_UNIX)
    agent.bind(str(path))
    agent.listen(1)
    connect = ("python3 -c \"import socket, sys; s = socket.socket(socket.AF_UNIX); "
               f"s.connect('{path}'); print('connected')\"")
    closed, open_ = environment(workspace, home), environment(workspace, home, network=True)
    try:
        refused = await closed.run(connect)
        reached = await open_.run(connect)
    finally:
        await closed.close()
        await open_.close()
        agent.close()
        shutil.rmtree(folder)
    assert "connected" not in refused.stdout and refused.returncode != 0
    assert "connected" in reached.stdout, reached.stderr  # the mask is for a closed network


def test_a_private_root_made_by_someone_else_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user who makes /tmp/hookline-<uid> first (or a folder others may enter)
    would read every session's files there: refused, never used."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    squatted = tmp_path / f"hookline-{os.getuid()}"
    squatted.mkdir(mode=0o755)
    squatted.chmod(0o755)
    with pytest.raises(HooklineError, match="is not a private folder of this user") as caught:
        sandbox.private_temp_root()
    assert "Remove it, or set TMPDIR" in caught.value.message
    squatted.chmod(0o700)
    assert sandbox.private_temp_root() == str(squatted)


def test_folders_of_killed_processes_are_removed_when_another_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process killed by SIGKILL cannot remove its private folder: the next one made
    removes it, once old enough, while a folder a live process holds stays."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom hookline.builtins.host.sandbox import "
         "PrivateFolder\nfolder = PrivateFolder('hookline-tool-')\n"
         "open(folder.path + '/written', 'w').write('a secret')\nprint(folder.path, "
         "flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert child.stdout is not None
    killed = Path(child.stdout.readline().strip())
    live = sandbox.PrivateFolder("hookline-bg-")
    recent = Path(sandbox.private_temp_root()) / "hookline-tool-recent"
    recent.mkdir()
    try:
        child.send_signal(signal.SIGKILL)
        child.wait()
        old = time.time() - sandbox.ABANDONED_AFTER - 1
        for folder in (killed, Path(live.path)):
            os.utime(folder, (old, old))
        assert (killed / "written").exists()
        made = sandbox.PrivateFolder("hookline-tool-")
        assert not killed.exists()
        assert os.path.isdir(live.path) and recent.is_dir() and os.path.isdir(made.path)
        made.remove()
        made.remove()  # a second time is harmless
        assert not os.path.exists(made.path)
    finally:
        live.remove()
        child.stdout.close()


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


def test_a_git_file_a_command_made_a_fifo_or_huge_is_not_read_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hookline reads `.git` files outside the sandbox, where commands make them: a FIFO
    swapped in after a look must not hang it, nor a gigabyte without a newline fill its
    memory."""
    for name in ("fifo", "huge", "linked"):
        (tmp_path / name).mkdir()
    os.mkfifo(tmp_path / "fifo" / ".git")
    with open(tmp_path / "huge" / ".git", "wb") as file:
        file.truncate(1 << 30)  # sparse: a gigabyte of zeros
    (tmp_path / "linked" / ".git").write_text("gitdir: ../store\n")
    real_isfile = os.path.isfile
    # As if the FIFO had been a regular file when looked at, and was swapped just after.
    monkeypatch.setattr(os.path, "isfile", lambda path: path.endswith("fifo/.git")
                        or real_isfile(path))
    found: list[list[str]] = []

    def search() -> None:
        tracemalloc.start()
        try:
            found.append(sandbox.repositories(str(tmp_path), sandbox.MAX_SEARCHED)[0])
            found.append([str(tracemalloc.get_traced_memory()[1])])
        finally:
            tracemalloc.stop()

    searching = threading.Thread(target=search, daemon=True)
    searching.start()
    searching.join(20)
    assert found, "the search hung on the FIFO"
    assert sorted(os.path.relpath(path, tmp_path) for path in found[0]) == [
        "fifo/.git", "huge/.git", "linked/.git", "store"]
    assert int(found[1][0]) < 1 << 20, "the search read the huge file whole"
