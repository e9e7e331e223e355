"""A plugin's failure, as `hookline run` shows it: one line naming plugin, hook and
function (and where), the traceback with -v, through the real console script and a real
installed entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from plugin_site import install_plugin
from test_cli import hookline

PLUGIN = '''
from hookline.kernel import hookimpl


class Faulty:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def after_tool_call(self, call, result):
        raise KeyError("x")

    @hookimpl
    def before_llm_call(self, request):
        return "not a decision"


class BrokenPrompt:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def system_prompt(self, prompt, state):
        return state["user_name"]
'''


def installed(tmp_path: Path, *entry: str, module: str = "faulty", source: str = PLUGIN
              ) -> dict[str, str]:
    """An environment (a fresh home, the offline model) in which `source`, installed as
    `module` with the `entry` points, is a plugin; with a workspace folder beside it."""
    site = install_plugin(tmp_path / "site", module, source, *entry)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(tmp_path / "home"), HOOKLINE_MODEL="offline",
               PYTHONPATH=str(site))
    (tmp_path / "workspace").mkdir()
    return env


TOOL = '/tool fs_write {"path": "a.txt", "content": "x"}'


def test_an_agent_hook_failure_is_one_line_and_the_turn_goes_on(tmp_path: Path) -> None:
    env = installed(tmp_path, "audit = faulty:Faulty")
    out = hookline("run", TOOL, env=env, cwd=tmp_path / "workspace")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "workspace" / "a.txt").read_text() == "x", "the turn went on"
    lines = out.stderr.splitlines()
    failed = [line for line in lines if "after_tool_call failed" in line]
    assert failed == ["warning: plugin 'audit' after_tool_call failed: KeyError 'x' "
                      "(faulty.py:11); -v for details"], out.stderr
    ignored = [line for line in lines if "before_llm_call returned" in line]
    assert ignored and ignored[0].startswith("warning: plugin 'audit' before_llm_call "
                                             "returned str where")
    assert "Traceback" not in out.stderr


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    env = installed(tmp_path, "audit = faulty:Faulty")
    out = hookline("run", "-v", TOOL, env=env, cwd=tmp_path / "workspace")
    assert out.returncode == 0, out.stderr
    assert "warning: plugin 'audit' after_tool_call failed: KeyError 'x'" in out.stderr
    assert "Traceback (most recent call last)" in out.stderr
    assert 'raise KeyError("x")' in out.stderr


@pytest.mark.parametrize("verbose", [False, True])
def test_a_failing_turn_hook_names_plugin_hook_and_function(tmp_path: Path,
                                                            verbose: bool) -> None:
    env = installed(tmp_path, "prompted = faulty:BrokenPrompt")
    out = hookline("run", *(["-v"] if verbose else []), "hi", env=env,
                   cwd=tmp_path / "workspace")
    assert out.returncode == 1
    [line] = [line for line in out.stderr.splitlines() if line.startswith("error: '")]
    assert "'user_name'" in line
    assert ("raised by plugin 'prompted', function 'BrokenPrompt.system_prompt' "
            "(") in line and "faulty.py:" in line and "hook system_prompt" in line
    assert "run without it: HOOKLINE_DISABLE_PLUGINS=prompted" in line
    assert ("Traceback (most recent call last)" in out.stderr) is verbose


CHATTY = '''
from hookline.kernel import hookimpl

print("CHATTY: imported")


class Chatty:
    def __init__(self, framework):
        print("CHATTY: made")

    @hookimpl
    def load_state(self, message, session_id):
        print("CHATTY: in a hook")
        return {}
'''


def test_what_a_plugin_prints_stays_off_stdout(tmp_path: Path) -> None:
    """stdout holds hookline's output alone (a reply, JSON lines): a plugin's prints, at
    import, in its factory or in a hook, go to stderr."""
    env = installed(tmp_path, "chatty = chatty:Chatty", module="chatty", source=CHATTY)
    done = hookline("run", "--json", "hi", env=env, cwd=tmp_path / "workspace")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["type"] for line in done.stdout.splitlines()][-1] == "reply"
    for said in ("imported", "made", "in a hook"):
        assert f"CHATTY: {said}" in done.stderr
    listed = hookline("plugins", "--json", env=env, cwd=tmp_path / "workspace")
    assert json.loads(listed.stdout)["chatty"]["ok"] is True


HOLLOW = '''
def nothing(framework):
    return None


class Idle:
    def __init__(self, framework):
        self.framework = framework
'''


def test_plugins_says_when_a_loaded_plugin_implements_nothing(tmp_path: Path) -> None:
    """A factory that returned None loads (as in the reference) but changes nothing: the
    listing says so, where a plain "loaded" would hide it."""
    site = install_plugin(tmp_path / "site", "hollow", HOLLOW,
                          "hollow = hollow:nothing", "idle = hollow:Idle")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(tmp_path / "home"), PYTHONPATH=str(site))
    (tmp_path / "workspace").mkdir()
    listed = hookline("plugins", env=env, cwd=tmp_path / "workspace").stdout
    rows = {line.split()[1]: line for line in listed.splitlines() if line.startswith("ok")}
    assert rows["hollow"].endswith("loaded, but its factory returned None: it implements no hook")
    assert rows["idle"].endswith("loaded, but it implements no hook")
    assert rows["builtin"].endswith("loaded")
    data = json.loads(hookline("plugins", "--json", env=env, cwd=tmp_path / "workspace").stdout)
    assert data["hollow"]["hooks"] == [] and data["hollow"]["detail"] == "loaded"
    assert "build_prompt" in data["builtin"]["hooks"]


COMMANDS_PLUGIN = '''
import typer
from hookline.kernel import hookimpl


class Broken:
    def __init__(self, framework):
        pass

    @hookimpl
    def register_cli_commands(self, app):
        print("printed while registering")
        raise RuntimeError("no commands today")


class Fine:
    def __init__(self, framework):
        pass

    @hookimpl
    def register_cli_commands(self, app):
        app.command(name="fine")(lambda: typer.echo("fine here"))


class Async:
    def __init__(self, framework):
        pass

    @hookimpl
    async def register_cli_commands(self, app):
        pass
'''


def test_a_plugin_whose_commands_fail_leaves_every_other_command(tmp_path: Path) -> None:
    env = installed(tmp_path, "broken = cmds:Broken", "fine = cmds:Fine", "asyncs = cmds:Async",
                    module="cmds", source=COMMANDS_PLUGIN)
    listed = hookline("plugins", "--json", env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert set(json.loads(listed.stdout)) >= {"broken", "fine"}
    (warning,) = [line for line in listed.stderr.splitlines() if "added no commands: Runt" in line]
    assert warning.startswith("warning: plugin 'broken' added no commands: RuntimeError: no "
                              "commands today (raised by plugin 'broken', function "
                              "'Broken.register_cli_commands' ("), warning
    assert warning.endswith("hook register_cli_commands; fix the plugin, or run without it: "
                            "HOOKLINE_DISABLE_PLUGINS=broken)"), warning
    assert "printed while registering" in listed.stderr  # never on stdout
    assert ("warning: plugin 'asyncs' register_cli_commands is async, so it added no "
            "commands: make it a plain def") in listed.stderr.splitlines()
    fine = hookline("fine", env=env, cwd=tmp_path)
    assert (fine.returncode, fine.stdout) == (0, "fine here\n"), fine.stderr
    run = hookline("run", "--json", "hello", env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert all(json.loads(line) for line in run.stdout.splitlines())


EXITING_PLUGIN = '''
import sys
from hookline.kernel import hookimpl


class Exiting:
    def __init__(self, framework):
        pass

    @hookimpl
    def load_state(self, message, session_id):
        sys.exit(4)
'''


def test_a_plugins_sys_exit_in_a_hook_is_the_turns_failure(tmp_path: Path) -> None:
    env = installed(tmp_path, "exiting = exiting:Exiting", module="exiting",
                    source=EXITING_PLUGIN)
    out = hookline("run", "--json", "hello", env=env, cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    (error,) = [json.loads(line) for line in out.stdout.splitlines()
                if json.loads(line)["type"] == "error"]
    assert error["message"].startswith("a plugin called sys.exit(4) inside a hook")
    assert "plugin 'exiting', function 'Exiting.load_state'" in error["message"]
    assert "Traceback" not in out.stderr


NOISY_PLUGIN = '''
import os
import subprocess
from hookline.kernel import hookimpl


class Noisy:
    def __init__(self, framework):
        pass

    @hookimpl
    def load_state(self, message, session_id):
        subprocess.run(["echo", "from a child process"], check=True)
        os.write(1, b"written to descriptor 1\\n")
        print("printed")
        return {}
'''


def test_nothing_a_plugin_writes_reaches_run_json_s_stdout(tmp_path: Path) -> None:
    """stdout of `run --json` is JSON lines only: a plugin's child process inherits a
    descriptor 1 that is stderr, and so do its own writes to it."""
    env = installed(tmp_path, "noisy = noisy:Noisy", module="noisy", source=NOISY_PLUGIN)
    out = hookline("run", "--json", "hello", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    kinds = [json.loads(line)["type"] for line in out.stdout.splitlines()]
    assert kinds[0] == "start" and kinds[-1] == "reply", out.stdout
    for line in ("from a child process", "written to descriptor 1", "printed"):
        assert line in out.stderr and line not in out.stdout
