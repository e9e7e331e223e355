"""The AGENTS.md files from the repository root down to the workspace reach the model only
as the repository's content: real turns (a scripted model records every request) on real
files: a link out of its folder, a FIFO, a second hard link, a sparse 100 MB file; normal
ones are sent root first, re-read when they change, within a total, and the reading
happens in a worker thread, not on the event loop."""

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
from hookline.builtins.host.instructions import MAX_AGENTS_BYTES, MAX_AGENTS_TOTAL
from hookline.kernel import Framework

pytestmark = pytest.mark.anyio

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key"
HEADER = ("AGENTS.md files from the repository root down to the working folder ({where}), "
          "paths from the root; each applies to its folder and those below it, and the "
          "deeper one wins where they differ:")
ALONE = HEADER.format(where="the root itself") + "\n\nAGENTS.md:\n"
"""The start of the section when the workspace's is the only file."""


def section(prompt: str) -> str:
    """The system prompt's AGENTS.md section, the last part of it in these turns."""
    return prompt[prompt.index("AGENTS.md files"):]


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
    (outside_link, "it links to {outside}/id_ed25519, outside its folder"),
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
        assert "AGENTS.md" not in prompt and SECRET not in prompt
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

        assert section(await turn("one")) == f"{ALONE}Use tabs."
        agents.write_text("Use spaces, four of them.\n")  # another size
        assert section(await turn("two")) == f"{ALONE}Use spaces, four of them."
        agents.write_text("Use SPACES, four of them.\n")  # the same size, at once
        assert section(await turn("three")) == f"{ALONE}Use SPACES, four of them."
        agents.unlink()
        assert "AGENTS.md" not in await turn("four")
    # Each change is said once (an agent's edit reaches every later turn's prompt).
    said = [r.getMessage() for r in caplog.records
            if r.name == "hookline.builtins.host.instructions"]
    assert len(said) == 2 and all(message.startswith(
        f"prompt.agents_md_changed path={agents}: the model reads it as it is now")
        for message in said), said


async def test_a_link_to_a_file_inside_the_workspace_is_sent(workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "agents.md").write_text("Run the tests first.\n")
    (workspace / "AGENTS.md").symlink_to("docs/agents.md")
    framework, _builtin = build_builtin(workspace, [{"text": "ok"}])
    (prompt,) = await system_prompts(framework, 1)
    assert f"{ALONE}Run the tests first." in prompt


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
    assert f"{ALONE}Be brief." in prompt
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
    assert all(f"{ALONE}Be brief." in prompt for prompt in prompts)
    assert hops.count("read_agents_files") == 1, hops  # the first turn's read only
    (workspace / "AGENTS.md").write_text("Be verbose.\n")
    prompt = (await system_prompts(framework, 1))[-1]
    assert f"{ALONE}Be verbose." in prompt and hops.count("read_agents_files") == 2, hops


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository (its `.git` a folder) with the working folder `pkg/api` in it."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "pkg" / "api").mkdir(parents=True)
    return root


def skipped(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The refusals said (a change said is another line, `prompt.agents_md_changed`)."""
    return [r.getMessage() for r in caplog.records
            if r.name == "hookline.builtins.host.instructions"
            and r.getMessage().startswith("prompt.agents_md_skipped")]


async def test_the_files_from_the_repository_root_down_are_sent_root_first_and_re_read(
    repo: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    (repo.parent / "AGENTS.md").write_text("Above the repository.\n")
    (repo / "AGENTS.md").write_text("Root rules.\n")
    (repo / "pkg" / "api" / "AGENTS.md").write_text("Api rules.\n")
    workspace = repo / "pkg" / "api"
    framework, builtin = build_builtin(workspace, [{"text": str(n)} for n in range(3)])
    head = HEADER.format(where="pkg/api")
    async with framework.running():
        async def turn(content: str) -> str:
            await framework.process_inbound({"content": content, "session_id": "cli:x"})
            return section(model_of(builtin).calls[-1].messages[0].text)  # type: ignore[arg-type]

        assert await turn("one") == (f"{head}\n\nAGENTS.md:\nRoot rules.\n\n"
                                     f"pkg/api/AGENTS.md:\nApi rules.")
        (repo / "AGENTS.md").write_text("Root rules, changed.\n")
        (repo / "pkg" / "AGENTS.md").write_text("Pkg rules.\n")  # a new one between them
        assert await turn("two") == (f"{head}\n\nAGENTS.md:\nRoot rules, changed.\n\n"
                                     f"pkg/AGENTS.md:\nPkg rules.\n\n"
                                     f"pkg/api/AGENTS.md:\nApi rules.")
        (repo / "AGENTS.md").unlink()
        (repo / "pkg" / "api" / "AGENTS.md").unlink()
        assert await turn("three") == f"{head}\n\npkg/AGENTS.md:\nPkg rules."
    assert not skipped(caplog)


async def test_a_git_file_marks_the_root_and_without_git_the_workspace_stands_alone(
    tmp_path: Path,
) -> None:
    """A worktree's `.git` is a file: the root is there, not at the repository above it;
    outside any repository, the folders above the workspace are not read."""
    outer = tmp_path / "outer"
    (outer / ".git").mkdir(parents=True)
    (outer / "AGENTS.md").write_text("Outer rules.\n")
    (outer / "wt" / "sub").mkdir(parents=True)
    (outer / "wt" / ".git").write_text("gitdir: ../.git/worktrees/wt\n")
    (outer / "wt" / "AGENTS.md").write_text("Worktree rules.\n")
    (outer / "wt" / "sub" / "AGENTS.md").write_text("Sub rules.\n")
    framework, _builtin = build_builtin(outer / "wt" / "sub", [{"text": "ok"}])
    (prompt,) = await system_prompts(framework, 1)
    assert section(prompt) == (f"{HEADER.format(where='sub')}\n\nAGENTS.md:\nWorktree "
                               f"rules.\n\nsub/AGENTS.md:\nSub rules.")
    plain = tmp_path / "plain"
    (plain / "work").mkdir(parents=True)
    (plain / "AGENTS.md").write_text("Above the workspace.\n")
    (plain / "work" / "AGENTS.md").write_text("Work rules.\n")
    framework, _builtin = build_builtin(plain / "work", [{"text": "ok"}])
    (prompt,) = await system_prompts(framework, 1)
    assert section(prompt) == f"{ALONE}Work rules."


async def test_a_refused_file_among_them_does_not_stop_the_others(
    repo: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """A link out of the repository, and one inside it but out of its own folder, are
    refused with one warning each; the working folder's file is still sent."""
    key = repo.parent / "id_ed25519"
    key.write_text(SECRET + "\n")
    (repo / "AGENTS.md").symlink_to(key)
    (repo / "docs").mkdir()
    (repo / "docs" / "agents.md").write_text("Docs rules.\n")
    (repo / "pkg" / "AGENTS.md").symlink_to("../docs/agents.md")
    (repo / "pkg" / "api" / "AGENTS.md").write_text("Api rules.\n")
    framework, _builtin = build_builtin(repo / "pkg" / "api", [{"text": "1"}, {"text": "2"}])
    with caplog.at_level(logging.WARNING, logger="hookline.builtins.host.instructions"):
        prompts = await system_prompts(framework, 2)
    for prompt in prompts:
        assert section(prompt) == (f"{HEADER.format(where='pkg/api')}\n\n"
                                   f"pkg/api/AGENTS.md:\nApi rules.")
    assert skipped(caplog) == [
        f"prompt.agents_md_skipped path={repo}/AGENTS.md reason=it links to {key}, outside "
        f"its folder; it is not sent to the model",
        f"prompt.agents_md_skipped path={repo}/pkg/AGENTS.md reason=it links to "
        f"{repo}/docs/agents.md, outside its folder; it is not sent to the model",
    ]


async def test_files_past_the_total_are_left_out_whole_and_named(
    repo: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    full = "x" * (MAX_AGENTS_BYTES - 1) + "\n"
    assert 2 * len(full) == MAX_AGENTS_TOTAL
    (repo / "AGENTS.md").write_text(full)
    (repo / "pkg" / "AGENTS.md").write_text(full)
    (repo / "pkg" / "api" / "AGENTS.md").write_text("Api rules.\n")
    framework, builtin = build_builtin(repo / "pkg" / "api", [{"text": "1"}, {"text": "2"}])
    with caplog.at_level(logging.WARNING, logger="hookline.builtins.host.instructions"):
        async with framework.running():
            async def turn(content: str) -> str:
                await framework.process_inbound({"content": content, "session_id": "cli:x"})
                return section(model_of(builtin).calls[-1].messages[0].text)  # type: ignore[arg-type]

            first = await turn("one")
            (repo / "AGENTS.md").write_text("Root rules.\n")
            second = await turn("two")
    assert first.endswith(f"pkg/AGENTS.md:\n{full.strip()}\n\nLeft out, past the "
                          f"{MAX_AGENTS_TOTAL:,} bytes of AGENTS.md sent to the model: "
                          f"pkg/api/AGENTS.md.")
    assert first.count(full.strip()) == 2 and "Api rules." not in first
    assert second.endswith("pkg/api/AGENTS.md:\nApi rules.") and "Left out" not in second
    assert skipped(caplog) == [
        f"prompt.agents_md_skipped path={repo}/pkg/api/AGENTS.md reason=the files above it "
        f"already take {MAX_AGENTS_TOTAL:,} of the {MAX_AGENTS_TOTAL:,} bytes sent to the "
        f"model; it is not sent to the model"]
