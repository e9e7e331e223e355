"""`python -m hookline.kernel.vendor`: a copy of the whole kernel carries its version and
licence at its root and an identity of its own, so in a process where hookline is
installed too, each loads only its own plugins and reads only its own variables (a real
dist-info declaring a plugin in each group, on the path of a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import hookline.kernel

ROOT = Path(__file__).resolve().parents[3]

PLUGINS = {
    "both_plugins.py": """
        from hookline.kernel import hookimpl

        class ForHookline:
            @hookimpl
            def resolve_session(self, message):
                return "hookline's plugin"

        def for_hookline(framework):
            return ForHookline()

        def for_myapp(framework):
            from myapp.vendored.kernel import hookimpl

            class ForMyapp:
                @hookimpl
                def resolve_session(self, message):
                    return "myapp's plugin"
            return ForMyapp()
    """,
    "both_plugins-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: both-plugins\n"
                                           "Version: 1.0\n",
    "both_plugins-1.0.dist-info/entry_points.txt": "[hookline]\nhl = both_plugins:for_hookline"
                                                   "\n\n[myapp]\nmine = both_plugins:for_myapp\n",
}


def vendor(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookline.kernel.vendor", *map(str, args)],
                          capture_output=True, text=True)


def test_a_vendored_kernel_knows_it_is_a_copy_and_stays_apart(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "myapp").mkdir(parents=True)
    (site / "myapp" / "__init__.py").write_text("")
    (site / "myapp" / "vendored").mkdir()
    (site / "myapp" / "vendored" / "__init__.py").write_text("")
    done = vendor(site / "myapp" / "vendored" / "kernel", "--package", "myapp")
    assert done.returncode == 0, done.stderr
    assert "loads plugins from the entry point group 'myapp' and reads MYAPP_* variables" \
        in done.stdout
    copy = site / "myapp" / "vendored" / "kernel"
    assert (copy / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    assert not (copy / "vendor.py").exists() and not list(copy.rglob("__pycache__"))
    first = (copy / "__init__.py").read_text().splitlines()[0]
    assert first.startswith("# hookline kernel ") and "MIT" in first
    for name, text in PLUGINS.items():
        (site / name).parent.mkdir(exist_ok=True)
        (site / name).write_text(textwrap.dedent(text))
    code = textwrap.dedent("""
        import asyncio, json
        import hookline.kernel as installed
        import myapp.vendored.kernel as copy

        def sessions(kernel):
            framework = kernel.Framework(".")
            framework.load_hooks()
            names = sorted(s.name for s in framework.plugin_status().values() if s.ok)
            said = asyncio.run(framework.resolve_session({"content": "x"}))
            return names, said

        print(json.dumps({"versions": [installed.__version__, copy.__version__],
                          "installed": sessions(installed), "copy": sessions(copy)}))
    """)
    def run(**variables: str) -> dict:
        env = {"PYTHONPATH": f"{site}:{ROOT.parent}", "PATH": "/usr/bin:/bin", **variables}
        ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        return dict(json.loads(ran.stdout))

    seen = run(HOOKLINE_DISABLE_PLUGINS="mine")  # not the copy's variable
    assert seen["versions"] == [hookline.kernel.__version__] * 2
    installed_plugins, installed_said = seen["installed"]
    assert "hl" in installed_plugins and "mine" not in installed_plugins
    assert installed_said == "hookline's plugin"
    assert seen["copy"] == [["mine"], "myapp's plugin"]
    seen = run(MYAPP_DISABLE_PLUGINS="mine,hl")  # the copy's own: hookline's is untouched
    assert seen["copy"][0] == [] and "hl" in seen["installed"][0]


def test_a_result_made_with_another_copys_classes_says_so(tmp_path: Path) -> None:
    """A plugin marked for both copies returns hookline's TapeContext to a whole-kernel
    copy: refused as of the wrong type (the classes differ), saying which copy it is of."""
    site = tmp_path / "site"
    (site / "myapp").mkdir(parents=True)
    (site / "myapp" / "__init__.py").write_text("")
    assert vendor(site / "myapp" / "kernel", "--package", "myapp").returncode == 0
    code = textwrap.dedent("""
        import hookline.kernel as installed
        import myapp.kernel as copy

        class Context:
            @installed.hookimpl
            def build_tape_context(self):
                return installed.TapeContext(window=3)

        framework = copy.Framework(".")
        framework.registry.register(Context(), name="ctx")
        try:
            framework.build_tape_context()
        except TypeError as exc:
            print(exc)
    """)
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": f"{site}:{ROOT.parent}", "PATH": "/usr/bin:/bin"},
                         cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "must return TapeContext" in ran.stdout, ran.stdout
    assert ("returned TapeContext (from hookline.kernel.tape: another copy of the kernel; "
            "build results with the classes of the kernel that runs the plugin)") in ran.stdout
