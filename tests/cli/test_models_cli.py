"""`hookline models` and model aliases, through the real console script (and a real
loopback model server for an alias used with -m)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from openai_server import OpenAIServer, Reply

HOOKLINE = Path(sys.executable).parent / "hookline"


def hookline(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(home), **extra)
    workspace = home.parent / "workspace"
    workspace.mkdir(exist_ok=True)
    return subprocess.run([str(HOOKLINE), *args], cwd=workspace, env=env, text=True,
                          capture_output=True, timeout=120)


def config(home: Path, text: str) -> None:
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "config.toml").write_text(text)
    (home / "config.toml").chmod(0o600)


def test_models_lists_the_model_fallbacks_and_aliases(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config(home, 'model = "fast"\nfallback_models = ["anthropic:claude-x"]\n'
                 '[model_aliases]\nfast = "openai:gpt-4o-mini"\nlocal = "ollama:llama3"\n')
    out = hookline(home, "models")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["current", "fast", "=", "openai:gpt-4o-mini"]
    assert lines[1].split()[:2] == ["fallback", "anthropic:claude-x"]
    assert [line.split()[1] for line in lines[2:]] == ["fast", "local"]
    data = json.loads(hookline(home, "models", "--json").stdout)
    assert data[0] == {"role": "current", "spec": "openai:gpt-4o-mini", "alias": "fast",
                       "source": f"(file {home / 'config.toml'})"}
    bare = hookline(tmp_path / "other", "models")
    assert bare.stdout.split()[:2] == ["current", "offline"]


def test_an_unknown_bare_name_is_one_clear_error(tmp_path: Path) -> None:
    out = hookline(tmp_path / "home", "models", HOOKLINE_MODEL="fsat")
    assert out.returncode == 1
    [line] = out.stderr.splitlines()
    assert "HOOKLINE_MODEL must be a model spec 'provider:model'" in line
    assert "a name of model_aliases" in line and "got 'fsat'" in line


def test_an_alias_given_with_model_reaches_the_server_as_its_spec(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with OpenAIServer([Reply(text="hello from the alias")]) as server:
        config(home, f'api_base = "{server.base_url}"\n'
                     f'[model_aliases]\nlocal = "openai-compatible:served-model"\n')
        out = hookline(home, "run", "-m", "local", "hi", HOOKLINE_API_KEY="sk-test")
        assert out.returncode == 0, out.stderr
        assert server.requests[0].body["model"] == "served-model"
    assert "hello from the alias" in out.stdout
