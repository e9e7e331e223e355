"""What `hookline run` sends, as a real OpenAI-compatible server on loopback receives it:
piped input before the prompt, attached text files and images, a system prompt for the
turn, and `--model` leaving the message alone."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from openai_server import OpenAIServer, Reply

HOOKLINE = Path(sys.executable).parent / "hookline"
SPEC = "openai-compatible:test-model"
PNG = base64.b64decode(  # a 1x1 transparent PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def run(workspace: Path, server: OpenAIServer, *args: str, stdin: Any = subprocess.DEVNULL,
        **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(workspace.parent / "home"), HOOKLINE_MODEL=SPEC,
               HOOKLINE_API_BASE=server.base_url, HOOKLINE_API_KEY="sk-test", **extra)
    return subprocess.run([str(HOOKLINE), "run", *args], cwd=workspace, env=env, text=True,
                          capture_output=True, timeout=120,
                          **({"input": stdin} if isinstance(stdin, str) else {"stdin": stdin}))


def user_text(server: OpenAIServer) -> Any:
    return server.requests[-1].messages[-1]["content"]


def test_piped_input_comes_before_the_prompt_as_llm_sends_it(workspace: Path) -> None:
    with OpenAIServer([Reply(text="found it")]) as server:
        done = run(workspace, server, "find the bug", stdin="def add(a, b):\n    return a - b\n")
        assert done.returncode == 0, done.stderr
        assert user_text(server) == "def add(a, b):\n    return a - b\n\nfind the bug"


def test_piped_input_too_large_is_refused_with_the_limit(workspace: Path) -> None:
    with OpenAIServer([Reply(text="never")]) as server:
        done = run(workspace, server, "summarise", stdin="x" * (1024 * 1024 + 10))
        assert done.returncode == 1 and not server.requests
    assert "larger than 1 MiB" in done.stderr


def test_an_attached_text_file_and_image_reach_the_model(workspace: Path) -> None:
    (workspace / "calc.py").write_text("print(1 + 1)\n")
    (workspace / "pixel.png").write_bytes(PNG)
    with OpenAIServer([Reply(text="seen")]) as server:
        done = run(workspace, server, "-a", "calc.py", "-a", "pixel.png", "what is this?")
        assert done.returncode == 0, done.stderr
        content = user_text(server)
    assert isinstance(content, list), content
    texts = [part["text"] for part in content if part.get("type") == "text"]
    images = [part for part in content if part.get("type") == "image_url"]
    assert texts and texts[0].startswith("what is this?\n\n--- calc.py ---\nprint(1 + 1)")
    [image] = images
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


def test_an_attachment_that_is_neither_text_nor_image_is_refused(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    os.mkfifo(workspace / "pipe.txt")
    with OpenAIServer([Reply(text="never")]) as server:
        binary = run(workspace, server, "-a", "blob.bin", "hi")
        fifo = run(workspace, server, "-a", "pipe.txt", "hi")
        missing = run(workspace, server, "-a", "nope.txt", "hi")
        assert not server.requests
    assert "neither UTF-8 text nor an image" in binary.stderr
    assert "cannot attach pipe.txt" in fifo.stderr and fifo.returncode == 1
    assert "cannot attach nope.txt: no such file" in missing.stderr
    (workspace / "logo.svg").write_text("<svg/>")
    with OpenAIServer([Reply(text="never")]) as server:
        svg = run(workspace, server, "-a", "logo.svg", "hi")
        assert not server.requests
    assert "image/svg+xml images are not sent to models" in svg.stderr


def test_a_system_prompt_for_the_turn(workspace: Path) -> None:
    with OpenAIServer([Reply(text="arr")]) as server:
        done = run(workspace, server, "-s", "Answer like a pirate.", "hello")
        assert done.returncode == 0, done.stderr
        [system] = [m for m in server.requests[-1].messages if m["role"] == "system"]
        assert system["content"].endswith("Answer like a pirate.")
        assert user_text(server) == "hello"


def test_model_flag_never_changes_the_message(workspace: Path) -> None:
    with OpenAIServer([Reply(text="ok")]) as server:
        done = run(workspace, server, "--model", SPEC, "hi")
        assert done.returncode == 0, done.stderr
        assert user_text(server) == "hi"


def test_run_follows_the_stream_setting(workspace: Path) -> None:
    """Configured `stream = true`: the reply's text shows while the model still sends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    with OpenAIServer([Reply(text="words arriving now", hold=True)]) as server:
        env.update(HOOKLINE_HOME=str(workspace.parent / "home"), HOOKLINE_MODEL=SPEC,
                   HOOKLINE_API_BASE=server.base_url, HOOKLINE_API_KEY="sk-test",
                   HOOKLINE_STREAM="true")
        proc = subprocess.Popen([str(HOOKLINE), "run", "go"], cwd=workspace, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            seen = proc.stdout.read1(4096).decode()  # type: ignore[attr-defined]
            assert "words" in seen, "streamed before the model finished"
            assert proc.poll() is None, "the model is still sending"
        finally:
            proc.kill()
            proc.wait()


def test_a_failed_turn_prints_no_partial_reply(workspace: Path) -> None:
    with OpenAIServer([Reply(text="half a repl", finish=False)]) as server:
        done = run(workspace, server, "hi")
    assert done.returncode == 1
    assert done.stdout == "", "no partial reply on stdout"
    assert "ended before it was complete" in done.stderr
