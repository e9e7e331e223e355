"""A tool call that was running when hookline was killed is not dropped: the store's
recovery records it with outcome `unknown`, and the next request shows the model the call
and that it may have run (a real `hookline run` SIGKILLed during a real sandboxed command,
a loopback OpenAI-compatible server recording what the next run sends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from openai_server import OpenAIServer, Reply

HOOKLINE = Path(sys.executable).parent / "hookline"
SPEC = "openai-compatible:test-model"
COMMAND = "touch started && sleep 60 && touch finished"


def test_a_call_running_at_a_sigkill_reaches_the_next_request_as_unknown(
        tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(tmp_path / "home"), HOOKLINE_MODEL=SPEC,
               HOOKLINE_API_KEY="sk-test")
    replies = [Reply(tool_calls=[{"id": "call_deploy", "name": "shell",
                                  "arguments": {"command": COMMAND}}]),
               Reply(text="I will check first.")]
    with OpenAIServer(replies) as server:
        env["HOOKLINE_API_BASE"] = server.base_url
        victim = subprocess.Popen([str(HOOKLINE), "run", "deploy it"], cwd=workspace, env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while not (workspace / "started").exists():
            assert time.monotonic() < deadline and victim.poll() is None, "never started"
            time.sleep(0.05)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(10)
        done = subprocess.run([str(HOOKLINE), "run", "-c", "did it deploy?"], cwd=workspace,
                              env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        messages = server.requests[1].messages
    assert done.stdout == "I will check first.\n"
    (asked,) = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    assert asked["tool_calls"][0]["id"] == "call_deploy"
    (told,) = [m for m in messages if m["role"] == "tool"]
    assert told["tool_call_id"] == "call_deploy"
    assert "outcome is unknown: it may have completed" in told["content"]
    assert messages[-1]["content"] == "did it deploy?"
    assert not (workspace / "finished").exists(), "the sandboxed command died with hookline"
    shown = subprocess.run([str(HOOKLINE), "sessions", "show"], cwd=workspace, env=env,
                           capture_output=True, text=True, timeout=60)
    assert "[tool] shell outcome unknown: hookline stopped while it ran" in shown.stdout
    assert "(turn interrupted" in shown.stdout
