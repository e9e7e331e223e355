"""Links against the protection of what git runs later, from real `shell` calls of
`hookline run`, as root and as `nobody`.

A repository's `.git` is kept read-only by a mount on it, which neither what a link in it
leads to nor another name of one of its files (a hard link) is under. The user's own
repositories lead elsewhere on purpose (`.git/hooks` to a tracked folder, a hook to a
script of the project); a command may set up the same in a repository it makes, with hard
links too, and write through them in a later run. Each time, the user's git, run after,
runs nothing a command wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from nobody_support import SETPRIV

HOOKLINE = Path(sys.executable).parent / "hookline"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0 or SETPRIV is None,
    reason="runs as root and as nobody (setpriv) on Linux")

HOOK = "#!/bin/sh\necho planted >> {proof}\n"
MONITOR = '[core]\n\tfsmonitor = "echo planted >> {proof}; false"\n'


@pytest.fixture
def places() -> Iterator[dict[str, Path]]:
    """A workspace holding the user's repositories that lead elsewhere: `tracked`, whose
    `.git/hooks` is a link to its tracked `githooks` folder; `linked`, whose pre-commit
    hook is a link to `scripts/pre-commit` and whose config is a link to a file beside it.
    And a hookline home, a fake HOME, and where planted code leaves its proof."""
    root = Path(tempfile.mkdtemp(prefix="hookline-links-test-", dir="/var/tmp"))
    root.chmod(0o755)
    found = {name: root / name for name in ("workspace", "home", "user")}
    for path in found.values():
        path.mkdir()
    found["home"].chmod(0o700)
    found["proof"] = root / "proof"
    workspace = found["workspace"]
    for name in ("tracked", "linked"):
        subprocess.run(["git", "init", "-q", str(workspace / name)], check=True)
    tracked = workspace / "tracked"
    (tracked / "githooks").mkdir()
    shutil.rmtree(tracked / ".git" / "hooks")
    (tracked / ".git" / "hooks").symlink_to("../githooks")
    linked = workspace / "linked"
    (linked / "scripts").mkdir()
    (linked / "scripts" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (linked / "scripts" / "pre-commit").chmod(0o755)
    (linked / ".git" / "hooks" / "pre-commit").symlink_to("../../scripts/pre-commit")
    (linked / ".git" / "config").rename(linked / "repository.gitconfig")
    (linked / ".git" / "config").symlink_to("../repository.gitconfig")
    try:
        yield found
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_shell(places: dict[str, Path], command: str, runner: list[str]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(places["home"]), HOME=str(places["user"]))
    prompt = "/tool shell " + json.dumps({"command": command})
    done = subprocess.run([*runner, "run", prompt], capture_output=True, text=True,
                          cwd=places["workspace"], env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr


def runner_for(places: dict[str, Path], user: str, nobody_python: list[str]) -> list[str]:
    """How `user` runs hookline; for `nobody`, the places handed to it first."""
    if user == "root":
        return [str(HOOKLINE)]
    for path in (places["workspace"], places["home"], places["user"]):
        subprocess.run(["chown", "-R", "nobody:nogroup", str(path)], check=True)
    places["proof"].parent.chmod(0o777)
    return nobody_python


def users_git(places: dict[str, Path], repository: str, user: str) -> None:
    """The user commits in `repository`, outside the sandbox, as `user`."""
    as_user = [] if user == "root" else [
        SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    env = {"PATH": os.environ["PATH"], "HOME": str(places["user"]),
           "GIT_CONFIG_NOSYSTEM": "1"}
    folder = places["workspace"] / repository
    (folder / "change.txt").write_text("a change\n")
    for args in (["add", "change.txt"],
                 ["-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-qm", "x"]):
        subprocess.run([*as_user, "git", *args], cwd=folder, env=env, capture_output=True,
                       check=False, timeout=60)


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_what_a_link_in_a_repository_leads_to_stays_the_users(
        places: dict[str, Path], user: str, nobody_python: list[str]) -> None:
    runner = runner_for(places, user, nobody_python)
    hook = HOOK.format(proof=places["proof"])
    first = run_shell(places, " ; ".join([
        f"printf '{hook}' > tracked/githooks/pre-commit",
        "chmod +x tracked/githooks/pre-commit",
        f"printf '{hook}' > linked/scripts/pre-commit",
        f"printf '{MONITOR.format(proof=places['proof'])}' >> linked/repository.gitconfig",
        # A repository and a protected file made now, each with a second name.
        "git init -q made", "ln made/.git/config made-config.txt",
        "echo '{}' > .mcp.json", "ln .mcp.json mcp-copy.json",
        "mkdir -p .jj/repo", "echo '[ui]' > .jj/repo/config.toml",
        "ln .jj/repo/config.toml jj-config.toml"]), runner)
    run_shell(places, " ; ".join([
        f"printf '{MONITOR.format(proof=places['proof'])}' >> made-config.txt",
        """printf '{"mcpServers": {"x": {"command": "sh"}}}' > mcp-copy.json""",
        "echo '[aliases]' >> jj-config.toml"]), runner)
    workspace = places["workspace"]
    assert (workspace / "tracked" / "githooks" / "pre-commit").exists() is False
    assert "planted" not in (workspace / "linked" / "scripts" / "pre-commit").read_text()
    assert "fsmonitor" not in (workspace / "linked" / "repository.gitconfig").read_text()
    assert "fsmonitor" in (workspace / "made-config.txt").read_text(), "the command wrote"
    assert "fsmonitor" not in (workspace / "made" / ".git" / "config").read_text()
    assert (workspace / ".mcp.json").read_text() == "{}\n"
    assert (workspace / ".jj" / "repo" / "config.toml").read_text() == "[ui]\n", "a level down"
    assert "had other names (hard links)" in first, first
    for repository in ("tracked", "linked", "made"):
        users_git(places, repository, user)
    assert not places["proof"].exists(), places["proof"].read_text()


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_links_to_links_are_followed_as_git_follows_them(
        places: dict[str, Path], user: str, nobody_python: list[str]) -> None:
    """A hook leading through a second link (`scripts/pre-commit` to `../tools/...`): the
    folder of that link is kept too; a hook leading through `/proc/self/cwd` (git's folder,
    not hookline's) is resolved as git resolves it; a link in the worktree's top folder,
    which nothing can keep, is named once a command changed it."""
    workspace = places["workspace"]
    for name in ("chained", "toplink", "viaproc"):
        subprocess.run(["git", "init", "-q", str(workspace / name)], check=True)
    chained = workspace / "chained"
    (chained / "tools").mkdir()
    (chained / "tools" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (chained / "tools" / "pre-commit").chmod(0o755)
    (chained / "scripts").mkdir()
    (chained / "scripts" / "pre-commit").symlink_to("../tools/pre-commit")
    (chained / ".git" / "hooks" / "pre-commit").symlink_to("../../scripts/pre-commit")
    toplink = workspace / "toplink"
    (toplink / "real-hooks").mkdir()
    (toplink / "hk").symlink_to("real-hooks")
    subprocess.run(["git", "-C", str(toplink), "config", "core.hooksPath", "hk"], check=True)
    viaproc = workspace / "viaproc"
    (workspace / "payload").write_text("#!/bin/sh\nexit 0\n")
    (workspace / "payload").chmod(0o755)
    (viaproc / ".git" / "hooks" / "pre-commit").symlink_to("/proc/self/cwd/../payload")
    runner = runner_for(places, user, nobody_python)
    hook = HOOK.format(proof=places["proof"])
    stderr = run_shell(places, " ; ".join([
        f"printf '{hook}' > chained/evil", "chmod +x chained/evil",
        "ln -sfn ../evil chained/scripts/pre-commit",
        f"printf '{hook}' >> payload",
        "mkdir toplink/evil", f"printf '{hook}' > toplink/evil/pre-commit",
        "chmod +x toplink/evil/pre-commit", "rm toplink/hk", "ln -s evil toplink/hk"]), runner)
    assert os.readlink(chained / "scripts" / "pre-commit") == "../tools/pre-commit"
    assert "planted" not in (workspace / "payload").read_text()
    assert "commands changed the link toplink/hk, which git follows" in stderr, stderr
    users_git(places, "chained", user)
    users_git(places, "viaproc", user)
    assert not places["proof"].exists(), places["proof"].read_text()
