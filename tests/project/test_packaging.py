"""A plain `pip install .` is whole: every source package is shipped, and every
distribution the code imports is declared (or its absence is accounted for)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"hookline_root": "hookline", "kernel": "hookline.kernel",
           "builtins": "hookline.builtins", "cli": "hookline.cli", "testing": "hookline.testing",
           "spec": "hookline.spec"}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for folder, package in FOLDERS.items():
        assert config["package-dir"][package] == folder
        for init in (ROOT / folder).rglob("__init__.py"):
            if {"__pycache__", "build"} & set(init.parts):  # build/: a wheel built in place
                continue
            relative = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *relative)))
    assert found - listed == set(), f"packages missing from pyproject.toml: {found - listed}"
    assert listed - found == set(), f"listed packages without a folder: {listed - found}"


# Third-party modules hookline imports without declaring a distribution that provides them
# in [project] dependencies, each with why a plain install is still whole.
NOT_DECLARED = {
    "bub": "the Bub layer, active only when the user installed Bub (builtins/bub)",
    "loguru": "the Bub layer: comes with Bub",
    "pydantic": "the Bub layer, guarded by ImportError: comes with Bub",
    "psycopg": "the PostgreSQL tape store: the `postgres` extra",
    "psycopg_pool": "the PostgreSQL tape store: the `postgres` extra",
    "opentelemetry": "traces and metrics (builtins/telemetry): the `otel` extra, imported "
                     "only with the otel setting or run --trace, a clear error without it",
    "httpx2": "republic's HTTP client, for its exception types (and the MCP client's): comes "
              "with republic",
    "trio": "the gateway on trio, guarded by ImportError: only when the host runs trio",
    "sniffio": "guarded by ImportError: present when trio is (trio needs it)",
    "pytest": "hookline.testing is a pytest plugin: pytest is what loads it",
    "mcp": "the MCP client (builtins/mcp), only with [mcp_servers]: the `mcp` extra",
    "mcp_types": "the MCP client: comes with mcp",
    "pluggy": "spec/pluggy_adapter.py, the suite's adapter for plain pluggy: its user has pluggy",
    "bub_feishu": "spec/bub_plugin_checks.py: run_bub_plugins.py installs the Bub plugins "
                  "it drives itself",
    "bub_qq": "spec/bub_plugin_checks.py: run_bub_plugins.py installs the Bub plugins it "
              "drives itself",
    "fastmcp": "spec/bub_plugin_checks.py: comes with the Bub plugins run_bub_plugins.py "
               "installs",
    "yaml": "spec/ on the reference: comes with Bub (bub_adapter.py, bub_plugin_checks.py)",
}


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level third-party module names imported anywhere in the packages (lazy and
    TYPE_CHECKING imports included), each with the files that import it."""
    found: dict[str, set[str]] = {}
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.partition(".")[0]
                    if (path.parent / f"{top}.py").exists():
                        continue  # a sibling imported by its bare name (spec/'s modules)
                    if top not in sys.stdlib_module_names and top not in ("hookline",
                                                                          "__future__"):
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_distribution_is_declared() -> None:
    """A plain `pip install .` has what the code imports: a module that only the test
    extra brings in (sniffio came with trio) would work in CI and fail for users."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_normalised(re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0])
                for spec in project["dependencies"]}
    providers = metadata.packages_distributions()
    imported = _third_party_imports()
    undeclared = {
        module: sorted(files) for module, files in imported.items()
        if module not in NOT_DECLARED
        and not {_normalised(d) for d in providers.get(module, [])} & declared
    }
    assert undeclared == {}, (
        f"imported without a declared dependency: {undeclared}; declare the distribution "
        f"in pyproject.toml or add the module to NOT_DECLARED with the reason")
    stale = sorted(set(NOT_DECLARED) - set(imported))
    assert stale == [], f"NOT_DECLARED names modules nothing imports: {stale}"
