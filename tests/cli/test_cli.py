"""The CLI through its real console script, in subprocesses, on a fresh hookline home."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hookline.kernel import HOOK_SPECS

HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    environ["HOOKLINE_HOME"] = str(tmp_path / "home")
    return environ


def hookline(*args: str, env: dict[str, str], cwd: Path | None = None,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
    assert HOOKLINE, "the hookline console script is not installed in this environment"
    return subprocess.run([HOOKLINE, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          input=input, timeout=120)


def test_a_deleted_current_folder_is_one_clear_error_or_left_for_w(
        env: dict[str, str], tmp_path: Path) -> None:
    """A shell left in a folder another terminal deleted: one line saying so (not
    `[Errno 2]`), and with `-w` naming a folder the command works from there."""
    assert HOOKLINE
    (tmp_path / "project").mkdir()

    def in_deleted(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", 'mkdir gone && cd gone && rmdir ../gone && exec "$@"',
                               "sh", HOOKLINE, *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)

    refused = in_deleted("run", "hello")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (
        "error: [config] the current folder cannot be read (No such file or directory: "
        "deleted, or moved away?): cd to a folder that exists, or name the workspace with "
        "-w /absolute/path\n")
    done = in_deleted("-w", str(tmp_path / "project"), "run", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[offline model]")


def test_run_answers_offline_on_a_fresh_home(env: dict[str, str], tmp_path: Path) -> None:
    out = hookline("run", "hello", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("[offline model]")
    assert '"hello"' in out.stdout
    assert (tmp_path / "home" / "tapes.db").is_file(), "the turn is recorded on the tape store"


def test_run_streams_and_runs_a_tool(env: dict[str, str], tmp_path: Path) -> None:
    out = hookline("run", "--stream", '/tool fs_write {"path": "note.txt", "content": "hi"}',
                   env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "note.txt").read_text() == "hi"
    assert "[tool] fs_write" in out.stderr
    assert "wrote 2 bytes" in out.stdout


def test_history_survives_restarts_through_the_tape(env: dict[str, str], tmp_path: Path) -> None:
    assert hookline("run", "first message", env=env, cwd=tmp_path).returncode == 0
    out = hookline("run", '/tool tape_search {"query": "first message"}', env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "first message" in out.stdout.split("returned", 1)[1]


def test_bad_setting_is_one_clear_line(env: dict[str, str], tmp_path: Path) -> None:
    env["HOOKLINE_MAX_STEPS"] = "many"
    out = hookline("run", "hello", env=env, cwd=tmp_path)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: ") and "HOOKLINE_MAX_STEPS" in lines[0]
    assert "Traceback" not in out.stderr


def test_unreachable_provider_is_a_clear_error(env: dict[str, str], tmp_path: Path) -> None:
    env.update(HOOKLINE_MODEL="openai:gpt-test", HOOKLINE_API_KEY="k",
               HOOKLINE_API_BASE="http://127.0.0.1:9/v1")
    out = hookline("run", "hello", env=env, cwd=tmp_path)
    assert out.returncode == 1
    assert "openai:gpt-test" in out.stderr and "HOOKLINE_API_BASE" in out.stderr
    assert "Traceback" not in out.stderr


def test_hooks_lists_every_hook_in_execution_order(env: dict[str, str]) -> None:
    out = hookline("hooks", env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    listed = [line.split(":", 1)[0] for line in lines if ":" in line]
    assert listed[: len(HOOK_SPECS)] == list(HOOK_SPECS)
    assert "run_model_stream: builtin    [stored: builtin]" in lines
    data = json.loads(hookline("hooks", "--json", env=env).stdout)
    assert [h["name"] for h in data["hooks"] if h["kind"] is not None] == list(HOOK_SPECS)


def test_plugin_from_an_entry_point_shows_in_hooks_plugins_and_turns(
    env: dict[str, str], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    (site / "shouty-0.1.dist-info").mkdir(parents=True)
    (site / "shouty-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: shouty\nVersion: 0.1\n")
    (site / "shouty-0.1.dist-info" / "entry_points.txt").write_text(
        "[hookline]\nshouty = shouty_plugin:Shouty\n")
    (site / "shouty_plugin.py").write_text(textwrap.dedent("""
        from hookline.kernel import hookimpl

        class Shouty:
            def __init__(self, framework):
                self.framework = framework

            @hookimpl
            def build_prompt(self, message, session_id, state):
                return str(message.get("content", "")).upper()

            @hookimpl
            def provide_tool(self):  # misspelled on purpose
                return []
    """))
    env["PYTHONPATH"] = str(site)
    hooks = hookline("hooks", env=env)
    assert "build_prompt: shouty, builtin    [stored: builtin, shouty]" in hooks.stdout
    assert "did you mean 'provide_tools'?" in hooks.stdout
    assert "ok   shouty" in hookline("plugins", env=env).stdout
    out = hookline("run", "quiet please", env=env, cwd=tmp_path)
    assert '"QUIET PLEASE"' in out.stdout


def test_failed_plugin_is_reported_and_the_rest_still_work(
    env: dict[str, str], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    (site / "broken-0.1.dist-info").mkdir(parents=True)
    (site / "broken-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (site / "broken-0.1.dist-info" / "entry_points.txt").write_text(
        "[hookline]\nbroken = no_such_module:Plugin\n")
    env["PYTHONPATH"] = str(site)
    plugins = hookline("plugins", env=env)
    assert "FAIL broken" in plugins.stdout and "No module named 'no_such_module'" in plugins.stdout
    assert "plugin 'broken' failed to load" in hookline("hooks", env=env).stdout
    assert hookline("run", "hello", env=env, cwd=tmp_path).returncode == 0
    env["HOOKLINE_STRICT_PLUGINS"] = "1"
    strict = hookline("run", "hello", env=env, cwd=tmp_path)
    assert strict.returncode == 1 and "plugin 'broken'" in strict.stderr


def test_onboard_writes_the_config_file(env: dict[str, str]) -> None:
    out = hookline("onboard", "--yes", env=env)
    assert out.returncode == 0, out.stderr
    config = Path(env["HOOKLINE_HOME"]) / "config.toml"
    assert 'model = "offline"' in config.read_text()
    answered = hookline("onboard", "--model", "scripted:turns.json", env=env)
    assert answered.returncode == 0, answered.stderr
    assert 'model = "scripted:turns.json"' in config.read_text()
    unknown = hookline("onboard", "--plugin", "nope", env=env)
    assert unknown.returncode == 1 and "Available plugins: builtin" in unknown.stderr


def test_run_accepts_the_workspace_after_the_command(env: dict[str, str], tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    out = hookline("run", "--workspace", str(work),
                   '/tool fs_write {"path": "here.txt", "content": "x"}', env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (work / "here.txt").read_text() == "x"
    assert not (tmp_path / "here.txt").exists()


def test_unwritable_config_is_one_line(env: dict[str, str]) -> None:
    env["HOOKLINE_HOME"] = "/proc/hookline-cannot-exist"
    out = hookline("onboard", "--yes", env=env)
    assert out.returncode == 1
    assert out.stderr.startswith("error: ") and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_failing_turn_is_one_stderr_line(env: dict[str, str], tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "failing-0.1.dist-info").mkdir(parents=True)
    (site / "failing-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: failing\nVersion: 0.1\n")
    (site / "failing-0.1.dist-info" / "entry_points.txt").write_text(
        "[hookline]\nfailing = failing_plugin:Failing\n")
    (site / "failing_plugin.py").write_text(textwrap.dedent("""
        from hookline.kernel import hookimpl

        class Failing:
            def __init__(self, framework):
                self.framework = framework

            @hookimpl
            def load_state(self, message, session_id):
                raise ValueError("state store offline")
    """))
    env["PYTHONPATH"] = str(site)
    out = hookline("run", "hello", env=env, cwd=tmp_path)
    assert out.returncode == 1
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("error: state store offline (raised by plugin 'failing', "
                           "function 'Failing.load_state' (")
    assert line.endswith("failing_plugin.py:8), hook load_state; fix the plugin, or run "
                         "without it: HOOKLINE_DISABLE_PLUGINS=failing)"), "who, where, what to do"


def test_the_basics_version_bare_help_and_short_model_flag(env: dict[str, str],
                                                            tmp_path: Path) -> None:
    version = hookline("--version", env=env, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("hookline 0.")
    bare = hookline(env=env, cwd=tmp_path)
    assert bare.returncode == 0, "bare hookline shows the help and succeeds"
    assert "Usage: hookline" in bare.stdout and "run" in bare.stdout
    short = hookline("run", "-m", "offline", "hi", env=env, cwd=tmp_path)
    assert short.returncode == 0 and 'You said: "hi"' in short.stdout, "the text as typed"
    (tmp_path / "note.txt").write_text("a note")
    tool = hookline("run", "-m", "offline", '/tool fs_read {"path": "note.txt"}', env=env,
                    cwd=tmp_path)
    assert "Tool `fs_read` returned" in tool.stdout and "a note" in tool.stdout


def test_run_reads_the_message_from_stdin(env: dict[str, str], tmp_path: Path) -> None:
    dash = hookline("run", "-", env=env, cwd=tmp_path, input="from a pipe\nsecond line\n")
    assert dash.returncode == 0, dash.stderr
    assert '"from a pipe second line" (5 words, 2 lines)' in dash.stdout
    piped = hookline("run", env=env, cwd=tmp_path, input="no argument at all")
    assert piped.returncode == 0 and "no argument at all" in piped.stdout
    empty = hookline("run", "-", env=env, cwd=tmp_path, input="  \n")
    assert empty.returncode == 1 and empty.stderr.strip() == "error: the message is empty"


def test_the_workspace_must_be_an_existing_folder(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    for where in (str(tmp_path / "missing"), str(tmp_path / "a-file")):
        for args in (("-w", where, "run", "hi"), ("run", "-w", where, "hi")):
            out = hookline(*args, env=env, cwd=tmp_path)
            assert out.returncode == 2, (args, out.stdout)
            assert "--workspace" in out.stderr
    assert not (tmp_path / "missing").exists(), "nothing was created"


def test_a_failed_run_prints_nothing_on_stdout(env: dict[str, str], tmp_path: Path) -> None:
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps({"turns": [{"error": {"kind": "provider",
                                                      "message": "simulated outage"}}]}))
    env["HOOKLINE_MODEL"] = f"scripted:{turns}"
    out = hookline("run", "hello", env=env, cwd=tmp_path)
    assert out.returncode == 1
    assert out.stdout == "", "no empty line before the error"
    assert out.stderr.count("error:") == 1 and "simulated outage" in out.stderr


def test_a_disabled_builtin_plugin_is_said_when_nothing_answers(env: dict[str, str],
                                                                tmp_path: Path) -> None:
    env["HOOKLINE_DISABLE_PLUGINS"] = "builtin"
    out = hookline("run", "hi", env=env, cwd=tmp_path)
    assert out.returncode == 0
    assert out.stderr.startswith("warning: no plugin implements run_model or run_model_stream "
                                 "(the builtin plugin is disabled")


def test_a_disabled_plugin_is_said_as_such_and_a_misspelt_one_is_not_quiet(
        env: dict[str, str], tmp_path: Path) -> None:
    env["HOOKLINE_DISABLE_PLUGINS"] = "builtin,biultin"
    hooks = hookline("hooks", env=env, cwd=tmp_path).stdout
    assert "plugin 'builtin' is disabled (HOOKLINE_DISABLE_PLUGINS)" in hooks
    assert "plugin 'builtin' failed to load" not in hooks
    listed = hookline("plugins", env=env, cwd=tmp_path).stdout.splitlines()
    assert listed[0].split()[:2] == ["off", "builtin"]
    assert listed[1].split()[:2] == ["FAIL", "biultin"]
    assert listed[1].endswith("named in HOOKLINE_DISABLE_PLUGINS, but no installed plugin "
                              "has this name: check its spelling")


FAILING_LIFESPAN = '''
from hookline.kernel import hookimpl


class Closer:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def provide_lifespan(self):
        async def scope():  # an async generator: entered around the scope
            yield
            raise RuntimeError("the lifespan broke while closing")

        return scope()
'''


def test_a_lifespan_failing_at_close_keeps_the_reply(env: dict[str, str],
                                                     tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist = site / "closer-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: closer\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[hookline]\ncloser = closer:Closer\n")
    (site / "closer.py").write_text(FAILING_LIFESPAN)
    env["PYTHONPATH"] = str(site)
    env["HOOKLINE_MODEL"] = "offline"  # chosen on purpose: no notice on stderr
    out = hookline("run", "keep my reply", env=env, cwd=tmp_path)
    assert out.returncode == 1
    assert out.stdout.startswith("[offline model]") and "keep my reply" in out.stdout
    assert out.stderr.strip().splitlines() == [
        "error: the turn finished, but closing its resources failed: the lifespan broke "
        "while closing"]


def test_the_offline_notice_is_said_once_and_never_recorded(env: dict[str, str],
                                                           tmp_path: Path) -> None:
    out = hookline("run", "--session", "notice", '/tool shell {"command": "echo hi"}',
                   env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    notices = [line for line in out.stderr.splitlines() if "no model is configured" in line]
    assert len(notices) == 1 and "HOOKLINE_MODEL" in notices[0]
    assert "HOOKLINE_MODEL" not in out.stdout, "not part of any reply"
    shown = hookline("sessions", "show", "notice", env=env, cwd=tmp_path)
    assert "[offline model]" in shown.stdout and "HOOKLINE_MODEL" not in shown.stdout
    chosen = hookline("run", "-m", "offline", "hi", env={**env, "HOOKLINE_MODEL": "offline"},
                      cwd=tmp_path)
    assert "no model is configured" not in chosen.stderr


def test_a_settings_error_is_one_line_without_internal_blame(env: dict[str, str],
                                                             tmp_path: Path) -> None:
    home = Path(env["HOOKLINE_HOME"])
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text('modle = "offline"\n')
    (home / "config.toml").chmod(0o600)
    out = hookline("run", "hi", env=env, cwd=tmp_path)
    assert out.returncode == 1
    [line] = out.stderr.strip().splitlines()
    assert "Unknown setting 'modle'" in line and "Did you mean 'model'?" in line
    assert "raised by" not in line and "plugin.py" not in line


def test_shell_completion_script_and_completions(env: dict[str, str], tmp_path: Path) -> None:
    script = hookline("--show-completion", "bash", env=env, cwd=tmp_path)
    assert script.returncode == 0 and "_hookline_completion" in script.stdout
    assert "complete " in script.stdout and "_HOOKLINE_COMPLETE" in script.stdout
    words = {**env, "_HOOKLINE_COMPLETE": "complete_bash", "COMP_WORDS": "hookline sessions re",
             "COMP_CWORD": "2"}
    done = hookline(env=words, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.split() == ["rename"]
