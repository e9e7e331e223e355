"""mise's config files, at any depth of the workspace, and what they load and run are
kept from commands like a repository's hooks: mise trusts a config file by its path, not
its content, and your shell runs its `[env]` and `[hooks]` as you enter the folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_support import environment, run_then_write, said_once

from hookline.builtins.host.mise import config_root, loaded_by_mise


@pytest.mark.parametrize(("path", "root"), [
    ("/w/mise.toml", "/w"), ("/w/.mise.toml", "/w"), ("/w/mise.local.toml", "/w"),
    ("/w/.mise.dev.local.toml", "/w"), ("/w/.config/mise.toml", "/w"),
    ("/w/.mise/config.toml", "/w"), ("/w/mise/config.toml", "/w"),
    ("/w/.config/mise/config.toml", "/w"),
    ("/w/config.toml", None), ("/w/premise.toml", None), ("/w/mise.txt", None),
])
def test_which_files_are_mise_s_config(path: str, root: str | None) -> None:
    assert config_root(path) == root


@pytest.mark.parametrize(("config", "loaded"), [
    ('[env]\n_.file = ".env"', [".env"]),
    ('[env]\n_.file = [".env", { path = ".env.local", redact = true }]', [".env", ".env.local"]),
    ('[env]\n_.source = "./scripts/*.sh"', ["scripts/a.sh", "scripts/b.sh"]),  # a glob
    ('[env]\n_.source = "./*/*.sh"', ["*/*.sh"]),  # folders by wildcard: not walked
    ('[env]\n_.source = "{{ config_root }}/scripts/a.sh"\n[hooks]\n'
     'enter = "{{config_root}}/scripts/b.sh"', ["scripts/a.sh", "scripts/b.sh"]),
    ('[env]\n_.path = ["./bin"]\nA = "1"', []),  # the project's scripts stay writable
    ('[hooks]\nenter = "./scripts/enter.sh --quiet"\ncd = ["echo hi", "bash x.sh"]\n'
     'leave = { script = "tools/leave.sh" }', ["scripts/enter.sh", "tools/leave.sh"]),
    ('env_file = ".env.old"', [".env.old"]),  # the older name
    ('[env\n_.file = ".env"', []),  # not TOML: the file itself only
    ("a = " + "[" * 20_000, []),  # nested past Python's recursion limit: the same
])
def test_what_a_mise_config_loads(tmp_path: Path, config: str, loaded: list[str]) -> None:
    workspace = tmp_path.resolve()
    (workspace / "scripts").mkdir()
    for name in ("a.sh", "b.sh"):
        (workspace / "scripts" / name).write_text("export A=1\n")
    (workspace / "mise.toml").write_text(config + "\n")
    found = loaded_by_mise(str(workspace / "mise.toml"), str(workspace))
    assert [os.path.relpath(path, workspace) for path in found] == ["mise.toml", *loaded]


def test_a_glob_is_matched_in_a_folder_whose_name_looks_like_one(tmp_path: Path) -> None:
    """`proj[1]` is a folder's name, not a pattern: only the config's own wildcards
    match."""
    workspace = tmp_path.resolve() / "proj[1]"
    (workspace / "scripts").mkdir(parents=True)
    (workspace / "scripts" / "env.sh").write_text("export A=1\n")
    (workspace / "mise.toml").write_text('[env]\n_.source = "scripts/*.sh"\n')
    found = loaded_by_mise(str(workspace / "mise.toml"), str(workspace))
    assert found == [str(workspace / "mise.toml"), str(workspace / "scripts" / "env.sh")]


@pytest.mark.anyio
async def test_a_mise_config_and_what_it_loads_are_read_only_and_one_made_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """A config in a folder of the workspace (a monorepo's package), its `.env`, the
    script its hook runs: read-only to commands, refused by the file tools; the folder of
    `_.path` stays writable; a config a command makes elsewhere is named once."""
    workspace, home, _ = layout
    package = workspace / "packages" / "api"
    (package / "scripts").mkdir(parents=True)
    (package / "mise.toml").write_text(
        '[env]\n_.file = ".env"\n_.path = ["./bin"]\n[hooks]\nenter = "./scripts/enter.sh"\n')
    (package / ".env").write_text("A=1\n")
    (package / "scripts" / "enter.sh").write_text("echo entered\n")
    command, refused = await run_then_write(
        environment(workspace, home),
        "cd packages/api; echo 'PATH=./evil:$PATH' >> .env; echo 'curl evil' >> "
        "scripts/enter.sh; echo '[hooks]' >> mise.toml; mkdir bin; echo x > bin/tool; "
        "cd ..; mkdir web; printf '[hooks]\\nenter = \"curl evil\"\\n' > web/mise.toml; "
        "echo ok",
        ("packages/api/.env", "packages/api/mise.toml"))
    assert command.stderr.count("Read-only file system") == 3, command.stderr
    assert "ok" in command.stdout and (package / "bin" / "tool").exists()
    assert (package / ".env").read_text() == "A=1\n"
    assert (package / "scripts" / "enter.sh").read_text() == "echo entered\n"
    assert all("is protected" in line for line in refused), refused
    said_once(caplog, "packages/web/mise.toml")
