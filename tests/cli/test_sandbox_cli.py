"""The sandboxed shell and the filtered tool environment, through the real console script.

Every check runs a real `hookline run` (offline model, `/tool shell ...`) or a real gateway,
so what is shown is what a user gets: Landlock applied to the command the model asked for,
and the refusal reaching the model as the tool's error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_support import gateway_env, post, start_gateway_process

HOOKLINE = Path(sys.executable).parent / "hookline"

SECRETS = {
    "HOOKLINE_API_KEY": "sk-hookline-secret-1",
    "HOOKLINE_HTTP_TOKEN": "token-secret-0123456789abcdefghijklmnopqrstuv",
    "OPENAI_API_KEY": "sk-openai-secret-2",
    "REPUBLIC_ANTHROPIC_API_KEY": "sk-republic-secret-3",
    "PGPASSWORD": "pg-secret-4",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-5",
    "GITHUB_TOKEN": "ghp-secret-6",
    "DATABASE_URL": "postgresql://app:url-secret-7@db.example/app",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent-secret-8.sock",
}


@pytest.fixture
def places() -> Iterator[dict[str, Path]]:
    """A workspace, a hookline home and a user home beside it, and an unrelated folder:
    outside /tmp, which a sandboxed command sees replaced by its private folder."""
    root = Path(tempfile.mkdtemp(prefix="hookline-sandbox-test-", dir="/var/tmp"))
    found = {name: root / name for name in ("workspace", "home", "user", "other")}
    for path in found.values():
        path.mkdir()
    try:
        yield found
    finally:
        shutil.rmtree(root, ignore_errors=True)


REFUSED = ("Permission denied", "Read-only file system")
"""What a command sees writing outside its write set (Landlock, or the read-only mount)."""


def environment(places: dict[str, Path], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(places["home"]), HOME=str(places["user"]))
    env.update(extra)
    return env


def shell(places: dict[str, Path], command: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """One turn whose model asks for `command`; stdout shows the tool's result."""
    prompt = "/tool shell " + json.dumps({"command": command})
    return subprocess.run([str(HOOKLINE), "run", prompt], capture_output=True, text=True,
                          cwd=places["workspace"], env=environment(places, **extra), timeout=120)


CONNECT = ("python3 -c 'import socket,sys; socket.create_connection((\"127.0.0.1\", "
           "int(sys.argv[1])), 5); print(\"connected\")' {port}")


def test_the_default_sandbox_writes_only_the_workspace(places: dict[str, Path]) -> None:
    done = shell(places, "touch made-here && echo ok")
    assert done.returncode == 0 and "ok" in done.stdout
    assert (places["workspace"] / "made-here").exists()

    for target in (places["user"] / "x", places["other"] / "x", places["home"] / "x"):
        done = shell(places, f"touch {target}")
        assert "exit code: 1" in done.stdout, done.stdout
        assert any(word in done.stdout for word in REFUSED), done.stdout
        assert not target.exists()


def test_the_hookline_home_cannot_be_read(places: dict[str, Path]) -> None:
    shell(places, "true")  # the first turn creates the tape store
    assert (places["home"] / "tapes.db").exists()
    (places["home"] / "config.toml").write_text('api_key = "sk-config-secret"\n')
    (places["home"] / "config.toml").chmod(0o600)
    done = shell(places, f"cat {places['home']}/tapes.db {places['home']}/config.toml; "
                         f"grep -r secret {places['home']}")
    assert done.stdout.count("Permission denied") >= 2, done.stdout
    assert "sk-config-secret" not in done.stdout


def test_a_tape_store_outside_the_home_is_hidden_with_what_lies_beside_it(
        places: dict[str, Path]) -> None:
    """Its `-wal`, and the folders of its writers' locks and of keys' claims: a command
    holding a dead writer's lock would keep its run from being recovered."""
    store = places["other"] / "tapes.db"
    shell(places, "true", HOOKLINE_TAPE_STORE=str(store))
    (store.parent / "tapes.db-claims").mkdir(exist_ok=True)
    assert (store.parent / "tapes.db-owners").is_dir()
    done = shell(places, f"ls {store}-owners {store}-claims; cat {store}",
                 HOOKLINE_TAPE_STORE=str(store))
    assert done.stdout.count("Permission denied") >= 3, done.stdout


def test_a_private_temporary_folder_is_the_commands_tmpdir(places: dict[str, Path]) -> None:
    probe = f"hookline-sandbox-probe-{os.getpid()}"
    done = shell(places, f'echo data > "$TMPDIR/scratch" && cat "$TMPDIR/scratch" && '
                         f'echo "tmp=$TMPDIR"; touch /tmp/{probe}')
    assert "data" in done.stdout and "hookline-tool-" in done.stdout
    assert "Read-only file system" in done.stdout  # /tmp itself is not writable
    assert not Path("/tmp", probe).exists()
    assert "fine" in shell(places, "echo gone > /dev/null && echo fine").stdout


def test_tcp_is_refused_unless_the_network_is_allowed(
    places: dict[str, Path], listener: int
) -> None:
    done = shell(places, CONNECT.format(port=listener))
    assert "connected" not in done.stdout and "exit code: 1" in done.stdout, done.stdout

    done = shell(places, CONNECT.format(port=listener), HOOKLINE_SANDBOX_NETWORK="true")
    assert "connected" in done.stdout, done.stdout
    assert "may open network connections" in done.stderr


def test_read_only_refuses_workspace_writes(places: dict[str, Path]) -> None:
    done = shell(places, "cat /etc/hostname >/dev/null && echo read-ok; touch nope",
                 HOOKLINE_SANDBOX="read-only")
    assert "read-ok" in done.stdout and any(word in done.stdout for word in REFUSED)
    assert not (places["workspace"] / "nope").exists()


def test_off_gives_full_rights_and_is_warned(places: dict[str, Path]) -> None:
    target = places["other"] / "written"
    done = shell(places, f"touch {target}", HOOKLINE_SANDBOX="off")
    assert target.exists()
    assert "the shell sandbox is OFF (sandbox = off)" in done.stderr


def test_settings_left_out_of_sandbox_protect_are_writable_and_warned(
        places: dict[str, Path]) -> None:
    (places["workspace"] / ".vscode").mkdir()
    done = shell(places, "echo '{}' > .vscode/settings.json && echo written",
                 HOOKLINE_SANDBOX_PROTECT=".idea")
    assert "written" in done.stdout, done.stdout
    assert "warning: commands may change .vscode, .zed, .helix, .devcontainer" in done.stderr


def tool_environment(places: dict[str, Path], **extra: str) -> str:
    """What `env` prints inside a tool process (kept in a file: the offline model shortens
    long results)."""
    shell(places, "env > tool-env.txt", **extra)
    return (places["workspace"] / "tool-env.txt").read_text()


def test_no_secret_reaches_a_tool_process(places: dict[str, Path]) -> None:
    seen = tool_environment(places, MY_SETTING="visible-value", **SECRETS)
    assert "visible-value" in seen  # ordinary variables pass
    for name, value in SECRETS.items():
        assert value not in seen, name
    assert "HOOKLINE_PROCESS_OWNER=" in seen  # hookline's own marker is added back


def test_the_variable_api_key_env_names_is_kept_from_tools(places: dict[str, Path]) -> None:
    seen = tool_environment(places, HOOKLINE_API_KEY_ENV="LLM_API", LLM_API="sk-named-key")
    assert "sk-named-key" not in seen
    assert "sk-named-key" in tool_environment(places, LLM_API="sk-named-key")


def test_keep_and_drop_patterns(places: dict[str, Path]) -> None:
    seen = tool_environment(places, HOOKLINE_TOOL_ENV_KEEP="GITHUB_*",
                            HOOKLINE_TOOL_ENV_DROP="my_*", MY_SETTING="hidden-value", **SECRETS)
    assert SECRETS["GITHUB_TOKEN"] in seen
    assert "hidden-value" not in seen and SECRETS["OPENAI_API_KEY"] not in seen


def test_inherit_passes_everything_and_is_warned(places: dict[str, Path]) -> None:
    assert SECRETS["OPENAI_API_KEY"] in tool_environment(
        places, HOOKLINE_TOOL_ENV="inherit", **SECRETS)
    done = shell(places, "true", HOOKLINE_TOOL_ENV="inherit")
    assert "tool processes inherit hookline's whole environment" in done.stderr


def test_a_home_inside_the_workspace_is_refused_with_the_fix(places: dict[str, Path]) -> None:
    inner = places["workspace"] / ".hookline"
    done = shell(places, "touch x", HOOKLINE_HOME=str(inner))
    assert "Keep HOOKLINE_HOME outside the workspace" in done.stdout
    assert not (places["workspace"] / "x").exists()


def test_the_gateways_shell_is_sandboxed(places: dict[str, Path], listener: int) -> None:
    env = gateway_env(places["home"], HOME=str(places["user"]), OPENAI_API_KEY="sk-gw-secret")
    gateway = start_gateway_process(["--port", "0"], env, places["workspace"])
    try:
        def tool(command: str) -> str:
            prompt = "/tool shell " + json.dumps({"command": command})
            answer = post(gateway.url, {"content": prompt, "session_id": "sandbox"})
            assert answer.status == 200, answer.body
            return str(answer.json())

        assert "ok" in tool("touch in-workspace && echo ok")
        assert (places["workspace"] / "in-workspace").exists()
        assert any(word in tool(f"touch {places['user']}/x") for word in REFUSED)
        home = places["home"]
        assert "Permission denied" in tool(f"cat {home}/http_token {home}/tapes.db")
        assert "connected" not in tool(CONNECT.format(port=listener))
        listing = tool("env")
        assert "sk-gw-secret" not in listing and "test-token" not in listing
    finally:
        gateway.end()
