"""`hookline onboard` through the real console script: flags without a terminal, a real
test call over HTTP to a loopback OpenAI-compatible server, refusals that write nothing,
and the interactive questions in a tmux terminal (the typed key never on screen)."""

from __future__ import annotations

import os
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest
from openai_server import OpenAIServer, Reply
from terminal_support import HOOKLINE, TMUX, Terminal

SPEC = "openai-compatible:test-model"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("HOOKLINE_", "REPUBLIC_"))}
    environ["HOOKLINE_HOME"] = str(tmp_path / "home")
    return environ


@pytest.fixture
def config(env: dict[str, str]) -> Path:
    return Path(env["HOOKLINE_HOME"]) / "config.toml"


def hookline(*args: str, env: dict[str, str], cwd: Path | None = None,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
    """The console script with standard input from `input`, else from /dev/null: never a
    terminal, so nothing may be asked."""
    assert HOOKLINE, "the hookline console script is not installed in this environment"
    return subprocess.run([HOOKLINE, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          input=input, stdin=subprocess.DEVNULL if input is None else None,
                          timeout=120)


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Aborted" not in out.stdout + out.stderr and "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out.stderr
    return errors[0]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_flags_make_a_real_test_call_and_write_a_private_file(
        env: dict[str, str], config: Path, tmp_path: Path) -> None:
    config.parent.mkdir(parents=True)
    config.write_text('max_steps = 7\n\n[plugins.guard]\nforbidden = ["rm"]\n')
    with OpenAIServer([Reply(text="OK from the loopback server")], api_key="sk-onboard") as server:
        out = hookline("onboard", "--model", SPEC, "--api-base", server.base_url,
                       "--api-key", "sk-onboard", env=env)
        assert out.returncode == 0, out.stderr
        assert len(server.requests) == 1, "one test call, over HTTP"
        request = server.requests[0]
        assert request.messages[-1]["content"] == "Reply with OK"
        assert request.headers["authorization"] == "Bearer sk-onboard"
        assert "reply: OK from the loopback server" in out.stdout
        assert f"wrote {config}" in out.stdout and 'hookline run "hello"' in out.stdout
        assert "--api-key puts the key in your shell history" in out.stderr

        assert mode(config) == 0o600
        assert tomllib.loads(config.read_text()) == {
            "model": SPEC, "api_base": server.base_url, "api_key": "sk-onboard",
            "max_steps": 7, "plugins": {"guard": {"forbidden": ["rm"]}},
        }

        # What was written is what a turn uses.
        server.add(Reply(text="a real turn"))
        turn = hookline("run", "hello", env=env, cwd=tmp_path)
        assert turn.returncode == 0, turn.stderr
        assert "a real turn" in turn.stdout
        assert server.requests[-1].messages[-1]["content"] == "hello"

    # --yes alone keeps everything (the endpoint is gone now: no test call).
    kept = hookline("onboard", "--yes", "--no-test", env=env)
    assert kept.returncode == 0, kept.stderr
    assert "test call skipped (--no-test)" in kept.stdout
    assert tomllib.loads(config.read_text())["api_key"] == "sk-onboard"


def test_api_key_env_keeps_the_key_out_of_the_file(
        env: dict[str, str], config: Path, tmp_path: Path) -> None:
    config.parent.mkdir(parents=True)
    config.write_text(f'model = "{SPEC}"\napi_key = "sk-old"\n')
    config.chmod(0o600)  # a config holding a key that others can read is refused
    env["MY_ONBOARD_KEY"] = "sk-from-env"
    with OpenAIServer([Reply(text="OK")], api_key="sk-from-env") as server:
        out = hookline("onboard", "-m", SPEC, "--api-base", server.base_url,
                       "--api-key-env", "MY_ONBOARD_KEY", env=env)
        assert out.returncode == 0, out.stderr
        assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"
        text = config.read_text()
        assert "sk-from-env" not in text and "sk-old" not in text
        assert tomllib.loads(text) == {"model": SPEC, "api_base": server.base_url,
                                       "api_key_env": "MY_ONBOARD_KEY"}
        assert mode(config) == 0o600

        # At run time the variable is read; empty, it is a clear error, not a keyless call.
        server.add(Reply(text="keyed turn"))
        assert "keyed turn" in hookline("run", "hello", env=env, cwd=tmp_path).stdout
        del env["MY_ONBOARD_KEY"]
        line = one_error_line(hookline("run", "hello", env=env, cwd=tmp_path))
        assert "MY_ONBOARD_KEY" in line and "empty or unset" in line
        assert len(server.requests) == 2


def test_an_endpoint_left_to_the_provider_is_not_the_environments(
        env: dict[str, str], config: Path) -> None:
    """No `--api-base` (or Enter at its question): the provider's own endpoint is the
    answer, so HOOKLINE_API_BASE in the environment is named, and the test call does not
    go there."""
    env["MY_ONBOARD_KEY"] = "sk-from-env"
    with OpenAIServer([Reply(text="OK")]) as elsewhere:
        env["HOOKLINE_API_BASE"] = elsewhere.base_url
        out = hookline("onboard", "-m", "openai:gpt-4o-mini", "--api-key-env",
                       "MY_ONBOARD_KEY", "--save-anyway", env=env)
        assert elsewhere.requests == [], "the test call went to the environment's endpoint"
    assert ("note: HOOKLINE_API_BASE is set in this environment and overrides api_base from "
            "the file when hookline runs") in out.stderr
    assert "api_base" not in tomllib.loads(config.read_text())


def test_openai_compatible_without_an_api_base_is_refused(
        env: dict[str, str], config: Path) -> None:
    line = one_error_line(hookline("onboard", "--model", SPEC, env=env))
    assert "needs the address of your server" in line and "--api-base" in line
    assert not config.exists()

    # An endpoint from the environment counts (HOOKLINE_API_BASE or republic's own).
    for variable in ("HOOKLINE_API_BASE", "REPUBLIC_OPENAI_COMPATIBLE_API_BASE"):
        with_env = dict(env, **{variable: "http://127.0.0.1:9/v1"})
        out = hookline("onboard", "--model", SPEC, "--no-test", env=with_env)
        assert out.returncode == 0, out.stderr
        assert tomllib.loads(config.read_text()) == {"model": SPEC}
        config.unlink()


@pytest.mark.parametrize(("args", "expected"), [
    (("--model", "gpt-4o"), "--model: model must be a model spec 'provider:model'"),
    (("--model", "nope:x"), "--model: unknown provider 'nope'"),
    (("--model", SPEC, "--api-base", "localhost:8080"),
     "--api-base: api_base must be an http:// or https:// URL, got 'localhost:8080'"),
    (("--model", SPEC, "--api-base", "http://h", "--api-key-env", "MY KEY"),
     "--api-key-env: api_key_env must be the name of an environment variable"),
    (("--model", "offline", "--api-key", "k"), "--api-key is for provider models"),
    (("--api-key", "k", "--api-key-env", "K"), "either --api-key or --api-key-env"),
])
def test_bad_answers_are_one_line_and_write_nothing(
        env: dict[str, str], config: Path, args: tuple[str, ...], expected: str) -> None:
    line = one_error_line(hookline("onboard", *args, env=env))
    assert expected in line
    assert not config.exists()


def test_without_a_terminal_or_flags_it_names_the_flags(
        env: dict[str, str], config: Path) -> None:
    for out in (hookline("onboard", env=env), hookline("onboard", env=env, input="offline\n")):
        line = one_error_line(out)
        assert "not a terminal" in line
        assert "--model SPEC" in line and "--api-base URL" in line and "--yes" in line
        assert not config.exists()


def test_a_failed_test_call_shows_the_error_and_writes_nothing(
        env: dict[str, str], config: Path) -> None:
    config.parent.mkdir(parents=True)
    config.write_text('model = "offline"\n')
    with OpenAIServer([Reply.failure(500, "the model exploded")]) as server:
        out = hookline("onboard", "-m", SPEC, "--api-base", server.base_url, env=env)
        assert len(server.requests) == 1
    line = one_error_line(out)
    assert "nothing written" in line and "--save-anyway" in line
    failed = [text for text in out.stderr.splitlines() if text.startswith("test call failed")]
    assert len(failed) == 1 and "HTTP 500: the model exploded" in failed[0]
    assert config.read_text() == 'model = "offline"\n'

    with OpenAIServer([Reply.failure(401, "bad key")]) as server:
        saved = hookline("onboard", "-m", SPEC, "--api-base", server.base_url, "--save-anyway",
                         env=env)
    assert saved.returncode == 0, saved.stderr
    assert "authentication failed" in saved.stderr and "saving anyway" in saved.stderr
    assert tomllib.loads(config.read_text())["model"] == SPEC


# In a terminal ----------------------------------------------------------------------------

needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")




@needs_tmux
def test_interactive_questions_hide_the_key_and_test_the_model(
        terminal: Terminal, tmp_path: Path) -> None:
    secret = "sk-typed-secret-7731"
    config = tmp_path / "home" / "config.toml"
    with OpenAIServer([Reply(text="OK, typed in a terminal")], api_key=secret) as server:
        terminal.start("onboard", "onboard")
        terminal.wait_for(lambda s: "Model (provider:model" in s and "[offline]:" in s,
                          "the model question")
        terminal.type("gpt4")  # no provider: refused, asked again
        terminal.wait_for(lambda s: "got 'gpt4'; try again" in s
                          and s.count("Model (provider:model") == 2, "the model asked again")
        terminal.type(SPEC)
        terminal.wait_for(lambda s: "API base URL of your server" in s, "the api_base question")
        terminal.type(server.base_url)
        terminal.wait_for(lambda s: "API key source (type, env, none)" in s, "the key question")
        terminal.type("type")
        terminal.wait_for(lambda s: "API key (hidden):" in s, "the hidden key prompt")
        terminal.type(secret)
        screen = terminal.wait_for(lambda s: "EXIT=" in s, "the end of onboarding")
        assert "EXIT=0" in screen, screen
        assert "reply: OK, typed in a terminal" in screen
        assert f"wrote {config}" in screen
        assert secret not in screen, "the typed key was shown on screen"
        assert server.requests[0].headers["authorization"] == f"Bearer {secret}"
        assert tomllib.loads(config.read_text()) == {
            "model": SPEC, "api_base": server.base_url, "api_key": secret}
    assert mode(config) == 0o600


@needs_tmux
def test_ctrl_c_at_a_question_writes_nothing(terminal: Terminal, tmp_path: Path) -> None:
    terminal.start("cancel", "onboard")
    terminal.wait_for(lambda s: "Model (provider:model" in s, "the model question")
    terminal.type("openai:gpt-4o-mini")
    terminal.wait_for(lambda s: "API base URL (optional" in s, "the api_base question")
    terminal.keys("C-c")
    screen = terminal.wait_for(lambda s: "EXIT=" in s, "the end of onboarding")
    assert "onboarding cancelled; nothing written" in screen and "EXIT=130" in screen
    assert "Aborted" not in screen
    assert not (tmp_path / "home" / "config.toml").exists()


@needs_tmux
def test_a_failed_test_call_asks_before_saving(terminal: Terminal, tmp_path: Path) -> None:
    config = tmp_path / "home" / "config.toml"
    terminal.env["ONBOARD_TEST_KEY"] = "sk-in-the-environment"
    with OpenAIServer([Reply.failure(503, "warming up")]) as server:
        terminal.start("failing", "onboard", "--model", SPEC, "--api-base", server.base_url)
        terminal.wait_for(lambda s: "API key source (type, env, none)" in s, "the key question")
        terminal.type("env")
        terminal.wait_for(lambda s: "Environment variable holding the key" in s,
                          "the variable question")
        terminal.type("ONBOARD_TEST_KEY")
        terminal.wait_for(lambda s: "What now (edit, retry, save, quit) [edit]:" in s,
                          "the question after the failed call")
        assert server.requests[0].headers["authorization"] == "Bearer sk-in-the-environment"
        terminal.type("quit")
        screen = terminal.wait_for(lambda s: "EXIT=" in s, "the end of onboarding")
    assert "test call failed:" in screen and "HTTP 503: warming up" in screen
    assert "nothing written" in screen and "EXIT=1" in screen
    assert not config.exists()


@needs_tmux
def test_after_a_failed_test_call_the_answers_are_kept_for_another_try(
        terminal: Terminal, tmp_path: Path) -> None:
    config = tmp_path / "home" / "config.toml"
    terminal.env["ONBOARD_TEST_KEY"] = "sk-in-the-environment"
    with OpenAIServer([Reply.failure(503, "warming up"), Reply.failure(503, "still warming"),
                       Reply(text="OK at last")]) as server:
        base = server.base_url
        terminal.start("again", "onboard")
        terminal.wait_for(lambda s: "Model (provider:model" in s, "the model question")
        terminal.type(SPEC)
        terminal.wait_for(lambda s: "API base URL of your server" in s, "the api_base question")
        terminal.type(server.base_url)
        terminal.wait_for(lambda s: "API key source (type, env, none)" in s, "the key question")
        terminal.type("env")
        terminal.wait_for(lambda s: "Environment variable holding the key" in s, "the name")
        terminal.type("ONBOARD_TEST_KEY")
        terminal.wait_for(lambda s: s.count("What now (edit, retry, save, quit)") == 1,
                          "the first failure")
        terminal.type("retry")  # the same answers, called again
        terminal.wait_for(lambda s: s.count("What now (edit, retry, save, quit)") == 2,
                          "the second failure")
        terminal.type("")  # edit: each question shows the last answer as its default
        terminal.wait_for(lambda s: f"[{SPEC}]:" in s, "the model question, with its answer")
        terminal.type("")
        terminal.wait_for(lambda s: f"[{server.base_url}]:" in s, "the api_base, kept")
        terminal.type("")
        terminal.wait_for(lambda s: "(type, env, none, keep) [keep]:" in s, "the key, kept")
        terminal.type("")
        screen = terminal.wait_for(lambda s: "EXIT=" in s, "the end of onboarding")
    assert "reply: OK at last" in screen and "EXIT=0" in screen, screen
    assert len(server.requests) == 3
    assert all(r.headers["authorization"] == "Bearer sk-in-the-environment"
               for r in server.requests)
    written = config.read_text()
    assert SPEC in written and base in written and "ONBOARD_TEST_KEY" in written


def test_an_error_about_an_answer_names_the_answers_not_the_unwritten_file(
        env: dict[str, str], config: Path) -> None:
    env.pop("ONBOARD_UNSET_KEY", None)
    out = hookline("onboard", "-m", "openai:gpt-4o-mini", "--api-key-env", "ONBOARD_UNSET_KEY",
                   env=env)
    assert out.returncode == 1 and not config.exists()
    [failed] = [line for line in out.stderr.splitlines() if line.startswith("test call failed")]
    assert "ONBOARD_UNSET_KEY" in failed and "from your answers (not written yet)" in failed
    assert str(config) not in failed


def test_what_another_command_wrote_while_onboarding_asked_is_kept(tmp_path: Path) -> None:
    """Onboarding writes what it changed of the file it read into the file as it is when
    it writes: an `mcp add` made while its questions waited is not lost."""
    from hookline.builtins.config import read_config_file, update_config
    from hookline.cli.onboard import _write

    path = tmp_path / "config.toml"
    path.write_text('model = "offline"\nmax_steps = 5\n')
    read = read_config_file(path)  # what onboarding started from
    update_config(path, {"mcp_servers": {"files": {"command": "npx"}}})  # meanwhile
    _write(path, {"model": "openai:gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}, read)
    assert read_config_file(path) == {
        "model": "openai:gpt-4o-mini", "api_key_env": "OPENAI_API_KEY",
        "mcp_servers": {"files": {"command": "npx"}}}
