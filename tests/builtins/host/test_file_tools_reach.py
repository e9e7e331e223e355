"""The file tools run in hookline's process, with your rights, not in the sandbox: they
reach no more than a command does. Not the hookline home, `sandbox_deny_read`, `/proc`,
the sessions' temporary folders, nor, with the network closed, `/run` and the container
engines' folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_support import environment

from hookline.builtins.host import sandbox
from hookline.kernel.errors import HooklineError


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
        with pytest.raises(HooklineError, match="the hookline home or its tape store"):
            await action
    assert "sk-in-home" in (home / "config.toml").read_text()
    await env.write_text("notes.txt", "fine")  # the rest of the workspace is the tools'
    assert (tmp_path / "notes.txt").read_text() == "fine"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["workspace-write", "off"])
async def test_the_file_tools_refuse_the_credentials_commands_may_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Started in your home folder, the file tools, which run with your rights, refuse
    `sandbox_deny_read` as the sandbox does: a key, a token reached through a link."""
    workspace = tmp_path / "you"
    (workspace / ".ssh").mkdir(parents=True)
    (workspace / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (workspace / ".aws").mkdir()
    (workspace / ".aws" / "credentials").write_text("aws_secret_access_key = S\n")
    (workspace / "c").symlink_to(".aws/credentials")
    monkeypatch.setenv("HOME", str(workspace))
    env = environment(workspace, tmp_path / "home", mode=mode)
    try:
        for action in (env.read_text(".ssh/id_ed25519"), env.read_text("c"),
                       env.write_text(".ssh/authorized_keys", "ssh-ed25519 AAAA evil\n")):
            with pytest.raises(HooklineError, match="sandbox_deny_read hides"):
                await action
        assert not (workspace / ".ssh" / "authorized_keys").exists()
        await env.write_text("notes.txt", "fine")  # the rest of the home is the tools'
    finally:
        await env.close()
    assert (workspace / "notes.txt").read_text() == "fine"


@pytest.mark.anyio
@pytest.mark.parametrize("network", [False, True])
async def test_the_file_tools_refuse_what_the_closed_network_masks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, network: bool) -> None:
    """With the network closed the sandbox masks the container engines' folders (Lima's
    keeps the ssh key of its VMs) and `/run`: so do the file tools, started in your home
    folder; with the network open, commands see them, and so do the tools."""
    workspace = tmp_path / "you"
    (workspace / ".lima" / "_config").mkdir(parents=True)
    (workspace / ".lima" / "_config" / "user").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(workspace))
    env = environment(workspace, tmp_path / "home", network=network)
    try:
        if network:
            assert await env.read_text(".lima/_config/user") == "PRIVATE KEY\n"
        else:
            with pytest.raises(HooklineError, match="masks while the network is closed"):
                await env.read_text(".lima/_config/user")
    finally:
        await env.close()


@pytest.mark.anyio
async def test_the_file_tools_started_at_the_root_refuse_proc_and_other_sessions_files(
        tmp_path: Path) -> None:
    """Started at `/` (read-only), the file tools, which run in hookline's process, refuse
    what a command sees only of its own: hookline's environment in `/proc` (its keys)
    and other sessions' temporary files."""
    other = sandbox.PrivateFolder("hookline-test-")
    try:
        (Path(other.path) / "notes").write_text("another session's\n")
        env = environment(Path("/"), tmp_path / "home", mode="read-only")
        try:
            for path in ("/proc/self/environ", f"/proc/{os.getpid()}/cmdline",
                         os.path.join(other.path, "notes")):
                with pytest.raises(HooklineError, match="hookline's own processes"):
                    await env.read_text(path)
            assert "root:" in await env.read_text("/etc/passwd")  # the rest is read
        finally:
            await env.close()
    finally:
        other.remove()
