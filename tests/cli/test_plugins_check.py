"""`hookline plugins check TARGET` through the real console script, on sample plugins
written into temporary folders: each broken variant is reported at its file:line with the
kernel's message and a fix, and the exit status says problems (1) from usage errors (2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))

HEADER = """\
from hookline.kernel import hookimpl


class Plugin:
    def __init__(self, framework):
        self.framework = framework

"""
"""A plugin module's first lines: the method under test starts on line 8."""

FIRST = len(HEADER.splitlines()) + 1


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    environ["HOOKLINE_HOME"] = str(tmp_path / "home")
    environ.pop("PYTHONPATH", None)
    return environ


def hookline(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    assert HOOKLINE, "the hookline console script is not installed in this environment"
    return subprocess.run([HOOKLINE, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


def write_plugin(folder: Path, body: str, module: str = "sample_plugin") -> Path:
    """`folder/<module>.py`: HEADER, then `body` indented into the class."""
    path = folder / f"{module}.py"
    path.write_text(HEADER + textwrap.indent(textwrap.dedent(body), "    "))
    return path


GOOD = """\
@hookimpl
def build_prompt(self, message, session_id, state) -> str:
    return "hi"

@hookimpl(tryfirst=True)
async def load_state(self, message, session_id) -> dict:
    return {}

@hookimpl
def provide_tools(self) -> list:
    return []

@hookimpl
def system_prompt(self, prompt, state, extra_setting=3):
    return "Be brief."

@hookimpl
def provide_lifespan(self):
    yield

@hookimpl
def dispatch_outbound(self, message) -> None:
    print(message)
"""


def test_a_good_plugin_passes(env: dict[str, str], tmp_path: Path) -> None:
    write_plugin(tmp_path, GOOD)
    out = hookline("plugins", "check", "sample_plugin:Plugin", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == "checked 1 plugin (Plugin): no problems\n"
    data = json.loads(hookline("plugins", "check", "sample_plugin:Plugin", "--json",
                               env=env, cwd=tmp_path).stdout)
    assert data["problems"] == []
    assert data["summary"] == {"plugins": ["Plugin"], "errors": 0, "warnings": 0, "ok": True}


def test_the_builtin_plugin_passes(env: dict[str, str], tmp_path: Path) -> None:
    """No false positive on the real thing: every hook, annotated, sync and async."""
    out = hookline("plugins", "check", "hookline.builtins:create_plugin", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.endswith(": no problems\n")


BROKEN = [
    pytest.param(
        """\
        @hookimpl
        def load_state(self, message, sesion_id):
            return {}
        """,
        "load_state", "unknown-parameter",
        "declares 'sesion_id', which the hook does not have; fix: the hook's parameters are "
        "(message, session_id): rename or remove the parameter",
        id="wrong-parameter"),
    pytest.param(
        """\
        @hookimpl(wrapper=True)
        def build_prompt(self, message):
            yield
        """,
        "build_prompt", "wrapper",
        "wrapper=True is not supported: the kernel calls implementations directly and has no "
        "wrapper support; fix: remove the marker and implement the hook as a plain function "
        "(use tryfirst/trylast to order it)",
        id="wrapper"),
    pytest.param(
        """\
        @hookimpl(hookwrapper=True)
        def build_prompt(self, message):
            yield
        """,
        "build_prompt", "hookwrapper", "hookwrapper=True is not supported: ",
        id="hookwrapper"),
    pytest.param(
        """\
        @hookimpl(tryfirst=True, trylast=True)
        def build_prompt(self, message):
            return "x"
        """,
        "build_prompt", "tryfirst-trylast",
        "tryfirst=True and trylast=True together are contradictory; fix: keep one of them",
        id="tryfirst-and-trylast"),
    pytest.param(
        """\
        @hookimpl
        async def system_prompt(self, prompt, state):
            return "Be brief."
        """,
        "system_prompt", "async-on-sync-hook",
        "is async, but system_prompt is dispatched on a sync path (many_sync), which skips "
        "the coroutine: it never takes effect; fix: make it a plain function (def)",
        id="async-on-sync-only-hook"),
    pytest.param(
        """\
        @hookimpl
        async def provide_lifespan(self):
            return None
        """,
        "provide_lifespan", "async-on-sync-hook",
        "fix: make it a plain function (def) or an async generator function (with yield)",
        id="async-on-a-provider"),
    pytest.param(
        """\
        @hookimpl
        def resolve_sesion(self, message):
            return "s"
        """,
        "resolve_sesion", "unknown-hook",
        "implements 'resolve_sesion', which is not a known hook; fix: did you mean "
        "'resolve_session'?",
        id="unknown-hook-did-you-mean"),
    pytest.param(
        """\
        @hookimpl
        def save_state(self, session_id, state=None):
            pass
        """,
        "save_state", "default-never-passed",
        "parameter 'state' has a default, so the hook's 'state' is never passed to it: it "
        "always sees None; fix: remove the default (state=None)",
        id="default-never-passed"),
    pytest.param(
        """\
        @hookimpl
        def render_outbound(self, message, /):
            return []
        """,
        "render_outbound", "positional-only",
        "positional-only parameter 'message' could never be passed (hooks are called with "
        "keyword arguments); fix: remove the '/'",
        id="positional-only"),
    pytest.param(
        """\
        @hookimpl
        def dispatch_outbound(self, *, mesage):
            return True
        """,
        "dispatch_outbound", "unknown-parameter",
        "declares 'mesage', which the hook does not have; fix: the hook's parameters are "
        "(message): rename or remove the parameter",
        id="required-keyword-only-not-of-the-hook"),
    pytest.param(
        """\
        @hookimpl
        def run_model(self, prompt) -> int:
            return 1
        """,
        "run_model", "return-type",
        "is annotated '-> int', but run_model returns str | None (int is not among them)",
        id="return-annotation-int-for-str"),
    pytest.param(
        """\
        @hookimpl
        def resolve_session(self, message) -> None:
            return None
        """,
        "resolve_session", "return-none",
        "is annotated '-> None', but resolve_session's result is used (the hook returns "
        "str | None): it never contributes",
        id="return-annotation-none-for-a-used-result"),
    pytest.param(
        """\
        @hookimpl
        async def run_model_stream(self, prompt, session_id, state):
            yield "x"
        """,
        "run_model_stream", "bare-async-generator",
        "refuses a bare async generator: it must return AsyncStreamEvents; fix: make it a "
        "plain def that returns AsyncStreamEvents(an async generator)",
        id="bare-async-generator-stream"),
    pytest.param(
        """\
        @hookimpl
        def provide_tools(self):
            yield None
        """,
        "provide_tools", "generator-result",
        "is a generator function (def with yield), so provide_tools gets a generator where "
        "it wants list[Tool] | None",
        id="generator-for-a-list"),
]


@pytest.mark.parametrize(("body", "hook", "code", "message"), BROKEN)
def test_each_broken_variant_is_reported_at_its_line(
    env: dict[str, str], tmp_path: Path, body: str, hook: str, code: str, message: str
) -> None:
    write_plugin(tmp_path, body)
    out = hookline("plugins", "check", "sample_plugin:Plugin", env=env, cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    first = out.stdout.splitlines()[0]
    prefix = f"sample_plugin.py:{FIRST}: [plugin Plugin] hook {hook}, function Plugin.{hook}: "
    assert first.startswith(prefix), first
    assert message in first
    assert out.stdout.splitlines()[-1] == "checked 1 plugin (Plugin): 1 error, 0 warnings"
    data = json.loads(hookline("plugins", "check", "sample_plugin:Plugin", "--json",
                               env=env, cwd=tmp_path).stdout)
    [problem] = data["problems"]
    assert (problem["file"], problem["line"], problem["hook"], problem["code"]) == (
        "sample_plugin.py", FIRST, hook, code)


def test_every_problem_is_reported_not_only_the_first(env: dict[str, str],
                                                      tmp_path: Path) -> None:
    """Registration stops at the first problem; the check lists them all, in file order."""
    write_plugin(tmp_path, """\
        @hookimpl(wrapper=True)
        def load_state(self, message, sesion_id, *, retries):
            return {}

        @hookimpl
        async def provide_tools(self):
            return []
    """)
    out = hookline("plugins", "check", "sample_plugin:Plugin", env=env, cwd=tmp_path)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    codes = ["wrapper=True is not supported", "declares 'sesion_id', 'retries'",
             "is async, but provide_tools"]
    assert len(lines) == len(codes) + 1
    for line, expected in zip(lines, codes, strict=False):
        assert expected in line, (expected, line)
    assert [line.split(":")[1] for line in lines[:-1]] == [str(FIRST)] * 2 + [str(FIRST + 4)]
    assert lines[-1] == "checked 1 plugin (Plugin): 3 errors, 0 warnings"


def test_warnings_pass_unless_strict(env: dict[str, str], tmp_path: Path) -> None:
    write_plugin(tmp_path, """\
        @hookimpl
        def build_prompt(self, message):
            return "x"

        def provide_tools(self):
            return []

        @hookimpl(optionalhook=True)
        def on_deploy(self, target):
            return None

        @hookimpl
        def save_state(self, session_id) -> str:
            return "saved"
    """)
    out = hookline("plugins", "check", "sample_plugin:Plugin", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"sample_plugin.py:{FIRST + 4}: [plugin Plugin] hook "
                               f"provide_tools, function Plugin.provide_tools: warning: is "
                               f"named like the hook 'provide_tools' but carries no mark")
    assert f"sample_plugin.py:{FIRST + 7}: [plugin Plugin] hook on_deploy" in lines[1]
    assert "warning: implements 'on_deploy', which is not a known hook" in lines[1]
    assert "warning: is annotated '-> str', but the framework ignores what save_state" in lines[2]
    assert lines[-1] == "checked 1 plugin (Plugin): 0 errors, 3 warnings"
    strict = hookline("plugins", "check", "--strict", "sample_plugin:Plugin", env=env,
                      cwd=tmp_path)
    assert strict.returncode == 1 and strict.stdout == out.stdout
    data = json.loads(hookline("plugins", "check", "--strict", "--json",
                               "sample_plugin:Plugin", env=env, cwd=tmp_path).stdout)
    assert {p["severity"] for p in data["problems"]} == {"warning"}
    assert data["summary"]["ok"] is False


def test_a_plugin_without_marked_functions_fails(env: dict[str, str], tmp_path: Path) -> None:
    write_plugin(tmp_path, """\
        def build_prompt(self, message):
            return "x"
    """)
    out = hookline("plugins", "check", "sample_plugin:Plugin", env=env, cwd=tmp_path)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[0].startswith(
        "sample_plugin.py:4: [plugin Plugin] target sample_plugin:Plugin: has no hook "
        "implementations (no function marked with @hookimpl); fix: mark its hook functions")
    assert "warning: is named like the hook 'build_prompt'" in lines[1]
    assert lines[-1] == "checked 1 plugin (Plugin): 1 error, 1 warning"


def test_json_shape(env: dict[str, str], tmp_path: Path) -> None:
    write_plugin(tmp_path, """\
        @hookimpl
        def load_state(self, message, sesion_id):
            return {}
    """)
    out = hookline("plugins", "check", "--json", "sample_plugin:Plugin", env=env, cwd=tmp_path)
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert set(data) == {"target", "problems", "summary"}
    assert data["target"] == "sample_plugin:Plugin"
    assert data["problems"] == [{
        "file": "sample_plugin.py", "line": FIRST, "plugin": "Plugin", "hook": "load_state",
        "function": "Plugin.load_state", "code": "unknown-parameter",
        "message": "declares 'sesion_id', which the hook does not have",
        "fix": "the hook's parameters are (message, session_id): rename or remove the "
               "parameter",
        "severity": "error", "source": None,
    }]
    assert data["summary"] == {"plugins": ["Plugin"], "errors": 1, "warnings": 0, "ok": False}


def test_a_module_target_and_its_import_failures(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "module_plugin.py").write_text(textwrap.dedent("""\
        from hookline.kernel import hookimpl


        @hookimpl
        def build_prompt(message, session_id, state):
            return "from a module"
    """))
    assert hookline("plugins", "check", "module_plugin", env=env, cwd=tmp_path).returncode == 0
    (tmp_path / "needs_dep.py").write_text("import os\nimport no_such_dependency_xyz\n")
    out = hookline("plugins", "check", "needs_dep", env=env, cwd=tmp_path)
    assert out.returncode == 1
    assert out.stdout.splitlines()[0] == (
        "needs_dep.py:2: [plugin needs_dep] target needs_dep: importing 'needs_dep' failed: "
        "ModuleNotFoundError: No module named 'no_such_dependency_xyz'; fix: install the "
        "missing dependency or fix the import")
    (tmp_path / "bad_syntax.py").write_text("x = 1\ndef broken(:\n")
    out = hookline("plugins", "check", "bad_syntax", env=env, cwd=tmp_path)
    assert out.returncode == 1 and out.stdout.startswith("bad_syntax.py:2: ")
    assert "SyntaxError" in out.stdout
    (tmp_path / "module_only.py").write_text(HEADER + "    @hookimpl\n"
                                             "    def run_model(self, prompt):\n"
                                             "        return 'x'\n")
    out = hookline("plugins", "check", "module_only", env=env, cwd=tmp_path)
    assert out.returncode == 1
    assert "has no hook implementations" in out.stdout
    assert "name the plugin object, module_only:Plugin" in out.stdout


@pytest.mark.parametrize(("target", "message"), [
    ("no_such_plugin_module", "'no_such_plugin_module' is no folder, importable module or "
                              "installed distribution"),
    ("no_such_plugin_module:Plugin", "no module named 'no_such_plugin_module'"),
    ("sample_plugin:Missing", "module 'sample_plugin' has no attribute 'Missing'"),
    ("./no/such/folder", "no folder './no/such/folder'"),
    ("empty", "has no pyproject.toml"),
    ("other", "has no [project.entry-points.hookline] table"),
])
def test_a_target_that_cannot_be_found_is_a_usage_error(
    env: dict[str, str], tmp_path: Path, target: str, message: str
) -> None:
    write_plugin(tmp_path, GOOD)
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "pyproject.toml").write_text(
        '[project]\nname = "other"\n[project.entry-points.console_scripts]\nx = "a:b"\n')
    out = hookline("plugins", "check", target, env=env, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == ""
    assert out.stderr.startswith("error: ") and message in out.stderr, out.stderr


def make_project(root: Path) -> Path:
    """A src-layout project whose pyproject declares a good and several broken entry
    points; returns the pyproject file."""
    package = root / "src" / "greeter"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(textwrap.dedent("""\
        from hookline.kernel import hookimpl

        VALUE = 42


        class Greeter:
            def __init__(self, framework):
                self.framework = framework

            @hookimpl
            def system_prompt(self, prompt, state) -> str:
                return "Greet the user by name."


        class NoInit:
            @hookimpl
            def build_prompt(self, message):
                return "x"


        def failing(framework):
            raise RuntimeError("needs a config file")


        def nothing(framework):
            return None
    """))
    pyproject = root / "pyproject.toml"
    pyproject.write_text(textwrap.dedent("""\
        [project]
        name = "greeter"
        version = "0.1"

        [project.entry-points.hookline]
        greeter = "greeter.plugin:Greeter"
        missing = "greeter.nothere:Plugin"
        noattr = "greeter.plugin:Nope"
        constant = "greeter.plugin:VALUE"
        failing = "greeter.plugin:failing"
        noinit = "greeter.plugin:NoInit"
        nothing = "greeter.plugin:nothing"
        builtin = "greeter.plugin:Greeter"
    """))
    return pyproject


def test_a_pyproject_folder_checks_each_entry_point(env: dict[str, str],
                                                    tmp_path: Path) -> None:
    make_project(tmp_path / "proj")
    out = hookline("plugins", "check", "proj", env=env, cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines == [
        "proj/pyproject.toml:7: [plugin missing] entry point greeter.nothere:Plugin: module "
        "'greeter.nothere' cannot be found; fix: check the module name, or install the "
        "package that provides it",
        "proj/pyproject.toml:8: [plugin noattr] entry point greeter.plugin:Nope: module "
        "'greeter.plugin' has no attribute 'Nope'; fix: fix the entry point's object name, or "
        "define it in the module",
        "proj/pyproject.toml:9: [plugin constant] entry point greeter.plugin:VALUE: "
        "greeter.plugin:VALUE is of type int, neither a plugin object nor a factory; fix: "
        "point the entry point at a module, a class, an instance or a factory function",
        "proj/src/greeter/plugin.py:22: [plugin failing] entry point greeter.plugin:failing: "
        "calling greeter.plugin:failing with the framework failed: RuntimeError: needs a "
        "config file; fix: an entry point that is callable is called with the framework as "
        "its only argument and must return the plugin object",
        "proj/src/greeter/plugin.py:15: [plugin noinit] entry point greeter.plugin:NoInit: "
        "calling greeter.plugin:NoInit with the framework failed: TypeError: NoInit() takes "
        "no arguments; fix: a class named by an entry point is instantiated with the "
        "framework: give it __init__(self, framework), or name an instance or a module",
        "proj/src/greeter/plugin.py:25: [plugin nothing] entry point greeter.plugin:nothing: "
        "calling greeter.plugin:nothing with the framework returned None; fix: return the "
        "plugin object from the factory",
        "proj/pyproject.toml:13: [plugin builtin] entry point greeter.plugin:Greeter: the "
        "entry point is named 'builtin', the name of hookline's builtin plugin: load_hooks() "
        "refuses it; fix: give the entry point another name (left of '=')",
        "checked 8 plugins (greeter, missing, noattr, constant, failing, noinit, nothing, "
        "builtin): 7 errors, 0 warnings",
    ]
    # The pyproject.toml itself names the same folder; from inside it, paths are shorter.
    inside = hookline("plugins", "check", "pyproject.toml", env=env, cwd=tmp_path / "proj")
    assert inside.stdout.splitlines()[0].startswith("pyproject.toml:7: [plugin missing]")


def test_the_folder_is_checked_not_an_installed_copy(env: dict[str, str],
                                                     tmp_path: Path) -> None:
    """An older copy of the package on the path (loaded by load_hooks()) is not what the
    folder target checks."""
    installed = tmp_path / "site"
    (installed / "greeter").mkdir(parents=True)
    (installed / "greeter" / "__init__.py").write_text("")
    (installed / "greeter" / "plugin.py").write_text("Greeter = 1\n")
    (installed / "greeter-0.0.dist-info").mkdir()
    (installed / "greeter-0.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: greeter\nVersion: 0.0\n")
    (installed / "greeter-0.0.dist-info" / "entry_points.txt").write_text(
        "[hookline]\ngreeter = greeter.plugin:Greeter\n")
    env["PYTHONPATH"] = str(installed)
    pyproject = make_project(tmp_path / "proj")
    pyproject.write_text(pyproject.read_text().split("missing =")[0])
    out = hookline("plugins", "check", "proj", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == "checked 1 plugin (greeter): no problems\n"


def test_an_installed_distribution(env: dict[str, str], tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "shouty-0.1.dist-info").mkdir(parents=True)
    (site / "shouty-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: shouty\nVersion: 0.1\n")
    (site / "shouty-0.1.dist-info" / "entry_points.txt").write_text(
        "[console_scripts]\nghost = shouty_plugin:main\n\n"
        "[hookline]\nshouty = shouty_plugin:Shouty\nghost = shouty_ghost:Plugin\n")
    write_plugin(site, """\
        @hookimpl
        def build_prompt(self, message, session_id, state):
            return str(message.get("content", "")).upper()

        @hookimpl
        def provide_tool(self):
            return []
    """, module="shouty_plugin").read_text()
    (site / "shouty_plugin.py").write_text(
        (site / "shouty_plugin.py").read_text().replace("class Plugin", "class Shouty"))
    env["PYTHONPATH"] = str(site)
    out = hookline("plugins", "check", "shouty", env=env, cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        f"site/shouty_plugin.py:{FIRST + 4}: [plugin shouty] hook provide_tool, function "
        f"Shouty.provide_tool: implements 'provide_tool', which is not a known hook; fix: did "
        f"you mean 'provide_tools'? rename the function, or name a known hook with specname= "
        f"(or mark it optionalhook=True if it is for a hook of a newer hookline)",
        "site/shouty-0.1.dist-info/entry_points.txt:6: [plugin ghost] entry point "
        "shouty_ghost:Plugin: module 'shouty_ghost' cannot be found; fix: check the module "
        "name, or install the package that provides it",
        "checked 2 plugins (shouty, ghost): 2 errors, 0 warnings",
    ]
    # Loading the installed plugins for the other commands is unchanged.
    plugins = hookline("plugins", env=env, cwd=tmp_path)
    assert "ok   shouty" in plugins.stdout and "FAIL ghost" in plugins.stdout
    assert set(json.loads(hookline("plugins", "--json", env=env, cwd=tmp_path).stdout)) == {
        "builtin", "shouty", "ghost"}


def test_nothing_is_started(env: dict[str, str], tmp_path: Path) -> None:
    """Lifespans, tape stores and turns stay untouched: a provider that would leave a file
    behind when entered leaves none."""
    write_plugin(tmp_path, f"""\
        @hookimpl
        def provide_lifespan(self):
            open({str(tmp_path / 'entered')!r}, "w").close()
            yield

        @hookimpl
        def provide_tape_store(self):
            open({str(tmp_path / 'store')!r}, "w").close()
            return None
    """)
    out = hookline("plugins", "check", "sample_plugin:Plugin", env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (tmp_path / "entered").exists() and not (tmp_path / "store").exists()
    assert not (tmp_path / "home" / "tapes.db").exists()


def test_plugins_help_lists_check(env: dict[str, str], tmp_path: Path) -> None:
    out = hookline("plugins", "--help", env=env, cwd=tmp_path)
    assert out.returncode == 0 and "check" in out.stdout and "--json" in out.stdout
