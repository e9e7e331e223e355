"""What a team vendoring the dispatch core relies on: the licence and version a copy
carries, pluggy's hookspec spellings answered with what to write, a strict runtime for
misspelled dispatch sites, and the entry-point loader on a really installed distribution."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from hookline.kernel import _dispatch
from hookline.kernel._dispatch import (
    HookimplMarker,
    HookRuntime,
    HookspecMarker,
    Registry,
    UnknownHookError,
    collect_specs,
)

ROOT = Path(__file__).resolve().parents[3]
hookspec = HookspecMarker("acme")
hookimpl = HookimplMarker("acme")


def test_core_version_is_the_release_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _dispatch.__version__ == version
    first_line = (ROOT / "kernel" / "_dispatch" / "__init__.py").read_text().splitlines()[0]
    assert first_line.startswith("# hookline dispatch core ")
    assert f" {version} " in first_line
    assert "MIT" in first_line and "the hookline authors" in first_line


def test_licence_file_is_the_projects_mit_licence() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the hookline authors" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "MIT"


def test_bare_hookspec_says_which_kind_to_write() -> None:
    with pytest.raises(TypeError) as caught:
        class Specs:
            @hookspec  # type: ignore[arg-type]
            def greet(self, name: str) -> None: ...
    message = str(caught.value)
    assert "@hookspec above 'greet' needs a dispatch kind" in message
    assert '@hookspec(kind="many")' in message


def test_firstresult_says_which_kind_to_write() -> None:
    with pytest.raises(TypeError) as caught:
        hookspec(firstresult=True)  # type: ignore[call-arg]
    message = str(caught.value)
    assert '@hookspec(kind="first")' in message and 'kind="first_sync"' in message
    with pytest.raises(TypeError, match=r"unknown option.*historic"):
        hookspec(historic=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="remove firstresult"):
        hookspec(kind="first", firstresult=True)  # type: ignore[call-arg]


def test_the_spelling_the_error_suggests_works() -> None:
    class Specs:
        @hookspec(kind="first_sync")
        def render(self, page: str) -> str | None:
            """Render a page."""

    specs = collect_specs(Specs)
    assert specs["render"].kind == "first_sync"
    assert specs["render"].params == ("page",)


class Renderer:
    @hookimpl
    def render(self, page: str) -> str:
        return f"<{page}>"


def _registry() -> Registry:
    class Specs:
        @hookspec(kind="first_sync")
        def render(self, page: str) -> str | None: ...

        @hookspec(kind="many")
        def publish(self, page: str) -> None: ...

    registry = Registry(collect_specs(Specs))
    registry.register(Renderer(), name="renderer")
    return registry


def test_default_runtime_returns_nothing_for_an_undeclared_name() -> None:
    runtime = HookRuntime(_registry())
    assert runtime.call_first_sync("rendr", page="x") is None
    assert runtime.call_many_sync("rendr", page="x") == []


def test_strict_runtime_raises_with_close_matches() -> None:
    runtime = HookRuntime(_registry(), strict=True)
    assert runtime.call_first_sync("render", page="x") == "<x>"
    assert asyncio.run(runtime.call_many("publish", page="x")) == []  # declared, no impls
    with pytest.raises(UnknownHookError) as caught:
        runtime.call_first_sync("rendr", page="x")
    assert caught.value.suggestions == ["render"]
    assert "hook 'rendr' is not declared by any spec; did you mean 'render'?" in str(
        caught.value)
    # The async primitives raise at the call, before anything is awaited.
    with pytest.raises(UnknownHookError, match=r"'publsh'.*'publish'"):
        runtime.call_many("publsh", page="x")
    with pytest.raises(UnknownHookError) as far:
        asyncio.run(runtime.notify("zzz"))
    assert far.value.suggestions == [] and "did you mean" not in str(far.value)
    assert isinstance(far.value, LookupError)


def test_hooklines_runtime_takes_strict_too() -> None:
    from hookline.kernel import HOOK_SPECS
    from hookline.kernel import HookRuntime as KernelRuntime

    runtime = KernelRuntime(Registry(HOOK_SPECS), strict=True)
    with pytest.raises(UnknownHookError, match="'resolve_session'"):
        runtime.call_first_sync("resolve_sesion", message={})
    asyncio.run(runtime.notify_error("turn", RuntimeError("x")))  # on_error is declared


PLUGIN_DIST = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "acme-plugins"
        version = "1.2.3"

        [project.entry-points.acme]
        upper = "acme_plugins:Upper"
        module = "acme_plugins"
        lower = "acme_plugins:make_lower"
        broken = "acme_plugins:missing"
    """,
    "acme_plugins.py": """
        from hookline.kernel._dispatch import HookimplMarker

        hookimpl = HookimplMarker("acme")


        class Upper:
            @hookimpl
            def render(self, page):
                return page.upper()


        def make_lower():
            class Lower:
                @hookimpl(trylast=True)
                def render(self, page):
                    return page.lower()
            return Lower()
    """,
}


@pytest.fixture(scope="module")
def installed_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """acme-plugins, installed by pip into a folder of its own (a real .dist-info)."""
    source = tmp_path_factory.mktemp("acme-src")
    for name, text in PLUGIN_DIST.items():
        (source / name).write_text(textwrap.dedent(text))
    target = tmp_path_factory.mktemp("site")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                          "--disable-pip-version-check", "--target", str(target), str(source)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    assert list(target.glob("acme_plugins-1.2.3.dist-info"))
    return target


def _run(site: Path, body: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent("""
        import sys
        from hookline.kernel._dispatch import (HookRuntime, HookspecMarker, Registry,
                                               collect_specs, load_entry_points)
        hookspec = HookspecMarker("acme")
        class Specs:
            @hookspec(kind="many_sync")
            def render(self, page): ...
        registry = Registry(collect_specs(Specs))
        runtime = HookRuntime(registry)
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})


@pytest.mark.slow
def test_entry_point_loader_registers_an_installed_distribution(installed_dist: Path) -> None:
    out = _run(installed_dist, """
        names = load_entry_points(registry, "acme", skip=["broken"],
                                  prepare=lambda obj: obj() if callable(obj) else obj)
        print(sorted(names))
        print(runtime.call_many_sync("render", page="Ab"))
        print(load_entry_points(registry, "acme", skip=["broken"]))  # all registered already
        print(load_entry_points(Registry(collect_specs(Specs)), "acme", name="module"))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['lower', 'module', 'upper']", "['AB', 'ab']", "[]",
                                       "['module']"]


@pytest.mark.slow
def test_entry_point_loader_names_the_entry_point_that_failed(installed_dist: Path) -> None:
    out = _run(installed_dist, """
        try:
            load_entry_points(registry, "acme", name="broken")
        except AttributeError as exc:
            print(type(exc).__name__, exc.__notes__)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        "AttributeError [\"while loading entry point broken = acme_plugins:missing of group "
        "'acme' (distribution acme-plugins 1.2.3)\"]"
    )


SHIM = """\
import runpy
import sys

sys.modules["hookline"] = None  # the copy must stand alone
args = sys.argv[1:]
if args[0] == "-c":
    sys.argv = ["-c", *args[2:]]
    exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
elif args[0] == "-m":
    sys.argv = [args[1], *args[2:]]
    sys.path.insert(0, "")
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
"""


def test_the_step_by_step_of_the_vendoring_page_runs(tmp_path: Path) -> None:
    """docs/vendoring.md's commands, as written, in under ten commands: in a folder of
    this test's own, with a ``python3`` in which hookline cannot be imported."""
    page = (ROOT / "docs" / "vendoring.md").read_text(encoding="utf-8")
    section = page[page.index("## Step by step: the core in your project"):]
    start = section.index("```sh\n") + len("```sh\n")
    block = section[start:section.index("\n```", start)]
    commands = [line for line in block.splitlines() if line.strip()]
    assert 0 < len(commands) < 10
    shim = tmp_path / "bin" / "python3"
    shim.parent.mkdir()
    shim.write_text(f"#!{sys.executable}\n{SHIM}")
    shim.chmod(0o755)
    script = block.replace("/tmp/myapp", str(tmp_path / "myapp"))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT,
                          capture_output=True, text=True,
                          env={"PATH": f"{shim.parent}:/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    dispatch = len(list((ROOT / "spec" / "fixtures" / "dispatch").glob("*.toml")))
    summary = (f"{dispatch} passed, 0 failed, 0 skipped, 0 failed as expected (suite 0.1.0, "
               f"adapter dispatch-core, asyncio)")
    assert done.stdout.splitlines() == [_dispatch.__version__, summary]
    assert f"`{summary}`" in " ".join(page.split()), "the page shows the run's output"
    licence = tmp_path / "myapp" / "myapp" / "hooks" / "LICENSE"
    assert licence.read_text().startswith("MIT License")
    copied = tmp_path / "myapp" / "suite" / "conformance"
    imported = {name for module in copied.glob("*.py") for name in
                re.findall(r"^\s*from \.(\w+) import", module.read_text(), re.MULTILINE)}
    missing = imported - {module.stem for module in copied.glob("*.py")}
    assert not missing, f"the page's copy lacks modules the suite imports: {sorted(missing)}"


def test_the_whole_kernel_names_its_release_and_licence_at_its_root() -> None:
    from hookline.kernel import _identity

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _identity.__version__ == version
    for path in (ROOT / "kernel" / "__init__.py", ROOT / "kernel" / "_identity.py"):
        first_line = path.read_text().splitlines()[0]
        assert first_line == (f"# hookline kernel {version} -- MIT licence, Copyright (c) "
                              f"2026 the hookline authors (LICENSE)"), path
