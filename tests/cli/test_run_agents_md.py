"""The AGENTS.md files `hookline run` sends from a subfolder of a repository, as a real
OpenAI-compatible server on loopback receives them in the system prompt: the root's and
the working folder's, root first; a refused one between them leaves the others sent, and
a file changed during the turn is sent changed at the next model call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from openai_server import OpenAIServer, Reply

HOOKLINE = Path(sys.executable).parent / "hookline"
HEAD = ("AGENTS.md files from the repository root down to the working folder (pkg/api), "
        "paths from the root; each applies to its folder and those below it, and the "
        "deeper one wins where they differ:")


def system_prompt(messages: list[dict[str, object]]) -> str:
    [system] = [m for m in messages if m["role"] == "system"]
    return str(system["content"])


def test_run_in_a_subfolder_sends_the_repository_s_files_root_first(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    workspace = repo / "pkg" / "api"
    workspace.mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Run the tests with `make test`.\n")
    os.mkfifo(repo / "pkg" / "AGENTS.md")  # refused: never opened for its content
    (workspace / "AGENTS.md").write_text("Use tabs.\n")
    edit = {"name": "fs_write", "arguments": {"path": "AGENTS.md", "content": "Use spaces.\n"}}
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    with OpenAIServer([Reply(tool_calls=[edit]), Reply(text="done")]) as server:
        env.update(HOOKLINE_HOME=str(tmp_path / "home"), HOOKLINE_MODEL="openai-compatible:m",
                   HOOKLINE_API_BASE=server.base_url, HOOKLINE_API_KEY="sk-test")
        done = subprocess.run([str(HOOKLINE), "run", "switch to spaces"], cwd=workspace,
                              env=env, text=True, capture_output=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        prompts = [system_prompt(request.messages) for request in server.requests]
    root = "AGENTS.md:\nRun the tests with `make test`."
    assert [prompt[prompt.index(HEAD):] for prompt in prompts] == [
        f"{HEAD}\n\n{root}\n\npkg/api/AGENTS.md:\nUse tabs.",
        f"{HEAD}\n\n{root}\n\npkg/api/AGENTS.md:\nUse spaces.",
    ]
    warnings = [line for line in done.stderr.splitlines() if "agents_md_skipped" in line]
    assert len(warnings) == 1 and (
        f"path={repo}/pkg/AGENTS.md reason=cannot read 'pkg/AGENTS.md': it is a FIFO"
        in warnings[0]), done.stderr
