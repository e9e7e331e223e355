"""What the command line imports at start-up: the boundaries that keep it fast, not timed.

Each command runs through the real console script in a fresh interpreter under
``python -X importtime``, which names every module the process imports (at start-up and
later, inside functions) together with the module that imported it first. Timings are
never asserted (benchmarks/bench_cli.py measures them); what is checked is which modules
are loaded at all:

- ``hookline --help`` and ``hookline --version`` build the application and print: no
  event loop, no tape store, no agent, no model client, no HTTP stack, no pydantic;
- ``hookline run hello`` runs one turn on the offline model (an empty HOOKLINE_HOME):
  neither republic nor an HTTP client or server, nor the scripted model or the republic
  client module, nor the MCP SDK or hookline's MCP client (no `[mcp_servers]`), nor
  pydantic (typer is kept below 0.29, which converts every option value with a pydantic
  TypeAdapter, see docs/performance.md), nor anything of OpenTelemetry (the `otel`
  setting is off; with it on, the same turn loads it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))

NETWORK = ("republic", "httpx", "httpx2", "httpcore", "hypercorn", "h11", "h2")
"""The model providers' client and the gateway's server, with what they stand on."""
RICH = ("rich", "markdown_it", "pygments")
"""typer's rich help formatter (the application is built with plain help)."""

HELP_FORBIDDEN = (
    # ssl comes with asyncio (which a turn needs), never before it
    *NETWORK, *RICH, "pydantic", "pydantic_core", "asyncio", "anyio", "ssl", "sqlite3",
    "hookline.builtins.agent.loop", "hookline.builtins.tape.tape",
    "hookline.builtins.store.sqlite.store", "hookline.builtins.models.base",
    "hookline.builtins.config.table",
    "hookline.builtins.host.background",
    "hookline.builtins.host.tools", "hookline.builtins.host.environment",
    "hookline.builtins.channels.manager", "hookline.builtins.channels.cli.channel",
    "hookline.cli.check", "prompt_toolkit",
)
OTEL = ("opentelemetry", "hookline.builtins.telemetry.setup",
        "hookline.builtins.telemetry.observer", "hookline.builtins.telemetry.agent_spans",
        "hookline.builtins.telemetry.metrics", "hookline.builtins.telemetry.gateway",
        "hookline.builtins.telemetry.console")
"""OpenTelemetry and the telemetry modules that use it: loaded only when telemetry is on."""
MCP = ("mcp", "mcp_types", "hookline.builtins.mcp")
"""The MCP SDK and hookline's client of it: only with `[mcp_servers]` in the config."""
RUN_FORBIDDEN = (
    *NETWORK, *RICH, *MCP, *OTEL,
    "hookline.builtins.models.republic_client", "hookline.builtins.models.scripted",
    "hookline.builtins.channels.manager", "hookline.builtins.channels.http.channel",
    "hookline.cli.check", "prompt_toolkit",
)


@dataclass(frozen=True)
class Imported:
    """One ``-X importtime`` line: the module and the chain of modules that imported it."""

    name: str
    chain: tuple[str, ...]


def imports(stderr: str) -> list[Imported]:
    """The modules of an ``-X importtime`` report, each with its importers, innermost first.

    The report lists a module after the modules it imports, indented one level deeper
    than its importer; a module's importer is the next line with less indentation."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        field = line.split("|", 2)[2]
        rows.append(((len(field) - len(field.lstrip())) // 2, field.strip()))
    found = []
    for index, (depth, name) in enumerate(rows):
        chain = []
        for later_depth, later in rows[index + 1:]:
            if later_depth < depth:
                chain.append(later)
                depth = later_depth
        found.append(Imported(name, tuple(chain)))
    return found


def loaded(found: Iterable[Imported], prefixes: Iterable[str]) -> list[str]:
    """The imported modules that are, or are inside, one of `prefixes`."""
    prefixes = tuple(prefixes)
    return sorted({item.name for item in found
                   if any(item.name == p or item.name.startswith(p + ".") for p in prefixes)})


def run_imports(tmp_path: Path, *args: str, **extra_env: str
                ) -> tuple[subprocess.CompletedProcess[str], list[Imported]]:
    assert HOOKLINE, "the hookline console script is not installed in this environment"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HOOKLINE_", "OTEL_"))} | extra_env
    env["HOOKLINE_HOME"] = str(tmp_path / "home")
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-X", "importtime", HOOKLINE, *args],
                          capture_output=True, text=True, env=env, cwd=workspace,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done, imports(done.stderr)


def test_the_importtime_reader_finds_each_importer() -> None:
    report = "\n".join([
        "import time: self [us] | cumulative | imported package",
        "import time:       10 |         10 |     c",
        "import time:       10 |         20 |   b",
        "import time:       10 |         10 |   d",
        "import time:       10 |         40 | a",
        "import time:       10 |         10 | e",
        "not an importtime line",
    ])
    found = {item.name: item.chain for item in imports(report)}
    assert found == {"c": ("b", "a"), "b": ("a",), "d": ("a",), "a": (), "e": ()}
    assert loaded(imports(report), ["a", "c.x"]) == ["a"]


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_help_and_version_load_no_turn_machinery(tmp_path: Path, args: tuple[str, ...]) -> None:
    done, found = run_imports(tmp_path, *args)
    assert done.stdout.strip(), "the command printed its output"
    assert loaded(found, ["hookline.cli.app", "typer"]), "the report names the CLI's modules"
    assert loaded(found, HELP_FORBIDDEN) == []


def test_an_offline_turn_loads_no_model_provider_nor_http(tmp_path: Path) -> None:
    done, found = run_imports(tmp_path, "run", "hello")
    assert done.stdout.startswith("[offline model]"), done.stdout
    assert loaded(found, ["hookline.builtins.agent.loop", "hookline.builtins.models.offline"])
    assert loaded(found, RUN_FORBIDDEN) == []
    # typer below 0.29 converts option values without pydantic (pyproject.toml).
    assert loaded(found, ["pydantic", "pydantic_core"]) == []


def test_an_offline_turn_loads_the_mcp_sdk_only_for_a_server_never_listed(
        tmp_path: Path) -> None:
    """The other side of the boundary above: `[mcp_servers]` brings hookline's MCP client
    in, and the SDK (with pydantic) while a server's tools must be listed; once its list is
    kept in the home, a turn that does not call its tools loads neither."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    server = Path(__file__).parents[1] / "builtins" / "mcp" / "mcp_server.py"
    (home / "config.toml").write_text(
        f'[mcp_servers.files]\ncommand = "{sys.executable}"\nargs = ["{server}", "stdio"]\n')
    done, found = run_imports(tmp_path, "run", "hello")
    assert done.stdout.startswith("[offline model]"), done.stdout
    assert "mcp" in loaded(found, MCP)
    assert "hookline.builtins.mcp.manager" in loaded(found, MCP)
    done, found = run_imports(tmp_path, "run", "hello")
    assert "files__echo" in done.stdout  # offered from the kept list
    assert "hookline.builtins.mcp.manager" in loaded(found, MCP)
    assert loaded(found, ["mcp", "mcp_types", "pydantic", "pydantic_core"]) == []


def test_an_offline_turn_with_otel_on_loads_opentelemetry(tmp_path: Path) -> None:
    """The other side of the boundary above: the same turn with `otel = true` (and no
    exporter, so nothing is sent anywhere) does load it."""
    done, found = run_imports(tmp_path, "run", "hello", HOOKLINE_OTEL="true",
                              OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none")
    assert done.stdout.startswith("[offline model]"), done.stdout
    assert "opentelemetry.sdk.trace" in loaded(found, ["opentelemetry"])
    assert loaded(found, ["hookline.builtins.telemetry.observer"])


def test_an_offline_turn_reads_entry_points_only_when_a_distribution_declares_some(
    tmp_path: Path,
) -> None:
    """``importlib.metadata`` (email, zipfile, csv) is imported only when some
    distribution on the path declares a ``hookline`` entry point, or Bub is installed."""
    probe = ("import importlib.util\n"
             "from hookline.kernel.framework.loading import may_declare_entry_points\n"
             "print(may_declare_entry_points('hookline')"
             " or importlib.util.find_spec('bub') is not None)")
    (tmp_path / "probe").mkdir()
    expected = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              cwd=tmp_path / "probe", check=True).stdout.strip()
    done, found = run_imports(tmp_path, "run", "hello")
    assert done.stdout.startswith("[offline model]"), done.stdout
    assert bool(loaded(found, ["importlib.metadata"])) == (expected == "True"), expected


GC_PROBE = """
import gc, sys
from hookline.cli import app
seen = {}
real_create_app = app.create_app
def create_app(*args, **kwargs):
    seen["collecting while built"] = gc.isenabled()
    return real_create_app(*args, **kwargs)
app.create_app = create_app
from hookline.cli import main
entry = main if sys.argv[1] == "console" else app.main
try:
    entry(["--help"])
except SystemExit:
    pass
print(seen["collecting while built"], gc.isenabled(), gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize(("entry", "expected"), [
    # the console script: no collection while the app is built, then start-up frozen
    ("console", "False True True"),
    # app.main, as a test or an embedding program calls it: the collector left alone
    ("app", "True True False"),
])
def test_only_the_console_script_pauses_and_freezes_the_collector(
    tmp_path: Path, entry: str, expected: str,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env["HOOKLINE_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", GC_PROBE, entry], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == expected, done.stdout
