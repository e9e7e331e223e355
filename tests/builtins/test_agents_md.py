"""The workspace's AGENTS.md reaches the model only as workspace content: real turns (a
scripted model records every request) on real files: a link out of the workspace, a
FIFO, a second hard link, a sparse 100 MB file; a normal one is sent and re-read when
it changes, and the reading happens in a worker thread, not on the event loop."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builtin_support import build_builtin, model_of

from hookline.builtins.host import instructions as instructions_module
from hookline.builtins.host.instructions import MAX_AGENTS_BYTES
from hookline.kernel import Framework

pytestmark = pytest.mark.anyio

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key"
HEADER = "AGENTS.md of the workspace:"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


async def system_prompts(framework: Framework, turns: int) -> list[str]:
    """The system message of each of `turns` real turns, as the model received it."""
    async with framework.running():
        for number in range(turns):
            await framework.process_inbound({"content": f"turn {number}",
                                             "session_id": "cli:agents"})
    builtin = framework.registry.get_plugin("builtin")
    return [call.messages[0].text for call in model_of(builtin).calls]  # type: ignore[arg-type]


def outside_link(workspace: Path) -> None:
    key = workspace.parent / "id_ed25519"
    key.write_text(SECRET + "\n")
    (workspace / "AGENTS.md").symlink_to(key)


def fifo(workspace: Path) -> None:
    os.mkfifo(workspace / "AGENTS.md")


def hard_link(workspace: Path) -> None:
    key = workspace.parent / "id_ed25519"
    key.write_text(SECRET + "\n")
    os.link(key, workspace / "AGENTS.md")


def huge(workspace: Path) -> None:
    with open(workspace / "AGENTS.md", "wb") as handle:
        handle.write(SECRET.encode() + b"\n")
        handle.truncate(100 * 1024 * 1024)  # sparse: 100 MB of size, little of disk


@pytest.mark.parametrize(("make", "reason"), [
    (outside_link, "it links to {outside}/id_ed25519, outside the workspace"),
    (fifo, "cannot read 'AGENTS.md': it is a FIFO (named pipe), not a regular file"),
    (hard_link, "cannot read 'AGENTS.md': it has 2 hard links"),
    (huge, f"it is 104,857,600 bytes, more than the {MAX_AGENTS_BYTES:,} bytes sent to "
           f"the model"),
])
async def test_an_agents_md_that_is_not_workspace_content_never_reaches_the_model(
    workspace: Path, caplog: pytest.LogCaptureFixture, make: Callable[[Path], None],
    reason: str,
) -> None:
    make(workspace)
    framework, _builtin = build_builtin(workspace, [{"text": "one"}, {"text": "two"}])
    with caplog.at_level(logging.WARNING, logger="hookline.builtins.host.instructions"):
        prompts = await system_prompts(framework, 2)
    assert len(prompts) == 2
    for prompt in prompts:
        assert HEADER not in prompt and SECRET not in prompt
    warnings = [r.getMessage() for r in caplog.records
                if r.name == "hookline.builtins.host.instructions"]
    assert len(warnings) == 1, "one warning per change of the file, not one per turn"
    assert warnings[0].startswith(f"prompt.agents_md_skipped path={workspace}/AGENTS.md "
                                  f"reason={reason.format(outside=workspace.parent)}")
    assert warnings[0].endswith("; it is not sent to the model")


async def test_a_normal_agents_md_is_sent_and_re_read_when_it_changes(
    workspace: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    agents = workspace / "AGENTS.md"
    agents.write_text("Use tabs.\n")
    framework, builtin = build_builtin(workspace, [{"text": str(n)} for n in range(4)])
    async with framework.running():
        async def turn(content: str) -> str:
            await framework.process_inbound({"content": content, "session_id": "cli:x"})
            return model_of(builtin).calls[-1].messages[0].text

        assert f"{HEADER}\nUse tabs." in await turn("one")
        agents.write_text("Use spaces, four of them.\n")  # another size
        assert f"{HEADER}\nUse spaces, four of them." in await turn("two")
        agents.write_text("Use SPACES, four of them.\n")  # the same size, at once
        assert f"{HEADER}\nUse SPACES, four of them." in await turn("three")
        agents.unlink()
        assert HEADER not in await turn("four")
    assert not [r for r in caplog.records if r.name == "hookline.builtins.host.instructions"]


async def test_a_link_to_a_file_inside_the_workspace_is_sent(workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "agents.md").write_text("Run the tests first.\n")
    (workspace / "AGENTS.md").symlink_to("docs/agents.md")
    framework, _builtin = build_builtin(workspace, [{"text": "ok"}])
    (prompt,) = await system_prompts(framework, 1)
    assert f"{HEADER}\nRun the tests first." in prompt


async def test_agents_md_is_read_in_a_worker_thread_during_turns(
    workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (workspace / "AGENTS.md").write_text("Be brief.\n")
    opened: list[threading.Thread] = []
    real = instructions_module.open_single_link

    def recording(*args: Any) -> Any:
        opened.append(threading.current_thread())
        return real(*args)

    monkeypatch.setattr(instructions_module, "open_single_link", recording)
    framework, _builtin = build_builtin(workspace, [{"text": "ok"}])
    loop_thread = threading.current_thread()
    (prompt,) = await system_prompts(framework, 1)
    assert f"{HEADER}\nBe brief." in prompt
    assert opened and all(thread is not loop_thread for thread in opened)


async def test_an_unchanged_agents_md_is_not_read_again_nor_sent_to_a_thread(
    workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Later turns only look at the file: no read, no worker thread, until it changes."""
    import anyio.to_thread

    (workspace / "AGENTS.md").write_text("Be brief.\n")
    os.utime(workspace / "AGENTS.md", (1_000_000_000, 1_000_000_000))  # not racy: reusable
    hops: list[str] = []
    real_hop = anyio.to_thread.run_sync

    async def counting(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(function, "__name__", repr(function)))
        return await real_hop(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    framework, _builtin = build_builtin(workspace, [{"text": str(n)} for n in range(4)])
    prompts = await system_prompts(framework, 3)
    assert all(f"{HEADER}\nBe brief." in prompt for prompt in prompts)
    assert hops.count("read_agents_file") == 1, hops  # the first turn's read only
    (workspace / "AGENTS.md").write_text("Be verbose.\n")
    prompt = (await system_prompts(framework, 1))[-1]
    assert f"{HEADER}\nBe verbose." in prompt and hops.count("read_agents_file") == 2, hops
