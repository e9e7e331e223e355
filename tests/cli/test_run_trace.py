"""`hookline run --trace`: the turn's span tree on stderr, with no collector anywhere.

The real console script in a subprocess, a fresh home beside the workspace; the offline
model calls a real tool (`/tool fs_write ...`), so the tree has a model call and a tool
call under the turn. Without OpenTelemetry's SDK the option is one clear error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from terminal_support import clean_env

HOOKLINE = str(Path(sys.executable).parent / "hookline")


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    environ = {k: v for k, v in clean_env(tmp_path / "home").items()
               if not k.startswith("OTEL_")}
    environ.update(HOOKLINE_MODEL="offline", **env)
    return subprocess.run([HOOKLINE, "run", *args], capture_output=True, text=True,
                          env=environ, cwd=workspace, timeout=120, check=False)


def test_trace_prints_the_span_tree_of_the_turn(tmp_path: Path) -> None:
    arguments = json.dumps({"path": "hello.txt", "content": "hi"})
    done = run(tmp_path, "--trace", "--session", "traced", f"/tool fs_write {arguments}")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "workspace" / "hello.txt").read_text() == "hi"
    lines = done.stderr.splitlines()
    turn = next(index for index, line in enumerate(lines) if line.startswith("hookline.turn "))
    assert "session traced ok" in lines[turn]
    below = lines[turn + 1:]
    assert all(line.startswith("  ") for line in below), below
    names = [line.split()[0] if not line.startswith("  hookline.hook") else
             " ".join(line.split()[:2]) for line in below if line.startswith("  ") and
             not line.startswith("    ")]
    assert names[:4] == ["hookline.hook resolve_session", "hookline.hook provide_environment",
                         "hookline.hook load_state", "hookline.hook build_prompt"]
    chats = [line for line in below if line.strip().startswith("chat offline")]
    assert len(chats) == 2 and "finish tool_calls" in chats[0] and "finish stop" in chats[1]
    (tool,) = [line for line in below if line.strip().startswith("execute_tool fs_write")]
    assert "ran (call " in tool
    assert any("hookline.hook build_prompt" in line and "answered by builtin" in line
               for line in below)
    assert all(" ms" in line for line in below)


def test_trace_shows_who_decided_a_tool_call(tmp_path: Path) -> None:
    """The tool's span carries the approval: the rule that denied it, or that allowed it."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[[rules]]\naction = "deny"\ntool = "fs_write"\npath = "*.lock"\n\n'
        '[[rules]]\naction = "allow"\ntool = "fs_write"\n')
    denied = run(tmp_path, "--trace", '/tool fs_write {"path": "a.lock", "content": "x"}')
    assert denied.returncode == 3, denied.stderr
    (tool,) = [line for line in denied.stderr.splitlines()
               if line.strip().startswith("execute_tool fs_write")]
    assert "denied (call " in tool and f"denied by rule, {home}/config.toml rule 1" in tool
    allowed = run(tmp_path, "--trace", '/tool fs_write {"path": "a.txt", "content": "x"}')
    (tool,) = [line for line in allowed.stderr.splitlines()
               if line.strip().startswith("execute_tool fs_write")]
    assert f"allowed by rule, {home}/config.toml rule 2" in tool


def test_trace_without_the_sdk_is_one_clear_error(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "opentelemetry.py").write_text("")  # not a package: no SDK under it
    done = run(tmp_path, "--trace", "hello",
               PYTHONPATH=os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")]))
    assert done.returncode == 1
    assert "--trace needs OpenTelemetry's SDK" in done.stderr
    assert "pip install 'hookline[otel]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_otel_on_without_the_sdk_is_one_clear_error(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "opentelemetry.py").write_text("")
    done = run(tmp_path, "hello", HOOKLINE_OTEL="true",
               PYTHONPATH=os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")]))
    assert done.returncode == 1
    assert "the otel setting is on, but OpenTelemetry's SDK is not installed" in done.stderr
    assert "pip install 'hookline[otel]', or set otel = false" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_exporter_variable_names_the_choices(tmp_path: Path) -> None:
    done = run(tmp_path, "hello", HOOKLINE_OTEL="true", OTEL_TRACES_EXPORTER="zipkin")
    assert done.returncode == 1
    assert ("OTEL_TRACES_EXPORTER='zipkin' is not an exporter hookline knows; use one of "
            "otlp, console, none") in done.stderr
    assert done.stdout == ""  # refused before the turn ran
