"""What a direnv `.envrc` loads from the workspace is kept from commands like a
repository's hooks: direnv asks again when the `.envrc` changes, not when the `.env` or
the flake it loads does, and your shell runs those as you enter the folder."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from sandbox_support import check_link_replaced, environment, run_then_write, said_once

from hookline.builtins.host.direnv import loaded_by_envrc


@pytest.mark.parametrize(("envrc", "loaded"), [
    ("dotenv", [".env"]),
    ("dotenv_if_exists .env.local  # the developer's own", [".env.local"]),
    ('dotenv "$PWD/.env.dev"\nsource_env_if_exists "${PWD}/sub"', [".env.dev", "sub/.envrc"]),
    ("source_env_if_exists sub\nsource ./scripts/env.sh", ["sub/.envrc", "scripts/env.sh"]),
    ("if has nix; then use flake; fi", ["flake.nix", "flake.lock"]),
    ("has nix && use flake ./nix#dev || dotenv .env.dev",
     ["nix/flake.nix", "nix/flake.lock", ".env.dev"]),
    ("use flake github:owner/repo", []),  # a remote flake: nothing in the workspace
    ("use nix", ["shell.nix", "default.nix"]),
    ("use nix -p python3", []),  # packages, no file
    ("use nix dev.nix", ["dev.nix"]),
    ("PATH_add bin\nexport A=1\nwatch_file x", []),  # the project's scripts stay writable
    ("source_env ../outside", []),  # outside the workspace: read-only anyway
    ("export A='open quote\ndotenv", [".env"]),  # a line that does not split is passed over
])
def test_what_an_envrc_loads(tmp_path: Path, envrc: str, loaded: list[str]) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "sub").mkdir(parents=True)
    (workspace / ".envrc").write_text(envrc + "\n")
    found = loaded_by_envrc(str(workspace / ".envrc"), str(workspace))
    assert [os.path.relpath(path, workspace) for path in found] == loaded


def test_an_envrc_that_is_a_link_is_read_where_it_points(tmp_path: Path) -> None:
    """An `.envrc` kept with the dotfiles and linked into the project: direnv reads it
    through the link, from the project's folder."""
    workspace = tmp_path.resolve() / "project"
    workspace.mkdir()
    (tmp_path / "dotfiles").mkdir()
    (tmp_path / "dotfiles" / "envrc").write_text("dotenv\n")
    (workspace / ".envrc").symlink_to(tmp_path / "dotfiles" / "envrc")
    assert loaded_by_envrc(str(workspace / ".envrc"), str(workspace)) == [
        str(workspace / ".env")]


def test_an_envrc_a_command_made_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    """hookline reads `.envrc` files outside the sandbox, where a command may have put a
    FIFO with no writer in place of one."""
    os.mkfifo(tmp_path / ".envrc")
    found: list[list[str]] = []
    reader = threading.Thread(
        target=lambda: found.append(loaded_by_envrc(str(tmp_path / ".envrc"), str(tmp_path))),
        daemon=True)
    reader.start()
    reader.join(5)
    assert found == [[]]


@pytest.mark.anyio
async def test_what_an_envrc_loads_is_read_only_and_one_made_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """The `.env` and the flake are read-only to commands and refused by the file tools;
    a `.env.local` the `.envrc` names but that did not exist is named once made, then
    protected; the rest of the folder stays writable."""
    workspace, home, _ = layout
    (workspace / "app").mkdir()
    (workspace / "app" / ".envrc").write_text(
        "dotenv\ndotenv_if_exists .env.local\nuse flake\nPATH_add bin\n")
    for name in (".env", "flake.nix", "flake.lock"):
        (workspace / "app" / name).write_text("A=1\n")
    command, refused = await run_then_write(
        environment(workspace, home),
        "cd app; echo 'PATH=./evil:$PATH' >> .env; echo '{ shellHook = \"x\"; }' > flake.nix; "
        "echo 'B=2' > .env.local; mkdir bin; echo 'echo hi' > bin/tool; echo ok",
        ("app/.env", "app/flake.lock"))
    assert command.stderr.count("Read-only file system") == 2, command.stderr
    assert "ok" in command.stdout and (workspace / "app" / "bin" / "tool").exists()
    assert (workspace / "app" / ".env").read_text() == "A=1\n"
    assert (workspace / "app" / "flake.nix").read_text() == "A=1\n"
    assert all("is protected" in line for line in refused), refused
    said_once(caplog, "app/.env.local")
    again = environment(workspace, home)
    try:
        after = await again.run("echo 'C=3' >> app/.env.local")
    finally:
        await again.close()
    assert "Read-only file system" in after.stderr


@pytest.mark.anyio
async def test_a_loaded_env_that_is_a_link_replaced_is_named_and_kept_from_then_on(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """A `.env` linked to a file of the project is kept where it points; a mount cannot
    be put on the link itself, so a command may replace it with a file of its own, which
    is named at the end of the turn and kept from then on."""
    workspace, home, _ = layout
    (workspace / "config").mkdir()
    (workspace / "config" / "dev.env").write_text("A=1\n")
    (workspace / ".envrc").write_text("dotenv\n")
    (workspace / ".env").symlink_to("config/dev.env")
    await check_link_replaced(environment(workspace, home), workspace, ".env", caplog)
