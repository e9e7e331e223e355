"""The documentation: the site builds cleanly, and the references cover the code.

- `mkdocs build --strict` succeeds with no warning (broken links and anchors are
  warnings, see mkdocs.yml, and strict mode turns them into errors);
- every hook of `HOOK_SPECS` has a `## <name>` entry in the English hooks reference and is
  named in the Chinese one;
- every command (and every option of it) that the command line offers is in docs/cli.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer

from hookline.kernel import HOOK_SPECS, Framework

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_site_builds_in_strict_mode_without_warnings(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    log = out.stdout + out.stderr
    assert "No module named mkdocs" not in log, "install the test extra: pip install -e '.[test]'"
    assert out.returncode == 0, log
    warnings = [line for line in log.splitlines() if "WARNING" in line]
    assert not warnings, "\n".join(warnings)
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "zh" / "hooks" / "index.html").is_file()


def test_every_hook_has_an_entry_in_the_english_reference() -> None:
    headings: dict[str, list[str]] = {}
    for page in sorted((DOCS / "hooks").glob("*.md")):
        for name in re.findall(r"^## (\S+)\s*$", page.read_text("utf-8"), re.MULTILINE):
            headings.setdefault(name, []).append(page.name)
    missing = [name for name in HOOK_SPECS if name not in headings]
    assert not missing, f"hooks without a '## <name>' entry in docs/hooks/: {missing}"
    duplicated = {name: pages for name, pages in headings.items()
                  if name in HOOK_SPECS and len(pages) > 1}
    assert not duplicated, f"hooks documented twice: {duplicated}"


def test_every_hook_is_in_the_chinese_reference() -> None:
    text = (DOCS / "zh" / "hooks.md").read_text("utf-8")
    missing = [name for name in HOOK_SPECS if f"`{name}`" not in text]
    assert not missing, f"hooks missing from docs/zh/hooks.md: {missing}"


def _core_cli() -> Any:
    """The application as `hookline` builds it, with the builtin plugin but without
    whatever plugins happen to be installed in this environment. (typer ships its own
    copy of click, so the command objects are inspected by their attributes.)"""
    from hookline.builtins import create_plugin
    from hookline.cli.app import create_app

    framework = Framework()
    framework.registry.register(create_plugin(framework), name="builtin")
    return typer.main.get_command(create_app(framework))


def _options(command: Any) -> list[str]:
    flags = []
    for param in command.params:
        if param.param_type_name == "option":
            flags += [flag for flag in [*param.opts, *param.secondary_opts] if flag != "--help"]
    return flags


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    text = "\n".join((DOCS / page).read_text("utf-8")
                     for page in ("cli.md", "cli-server.md", "cli-data.md"))
    group = _core_cli()
    assert group.commands, "the application has no commands"
    missing = [name for name in group.commands if f"## hookline {name}" not in text]
    assert not missing, f"commands without a '## hookline <name>' section in docs/cli.md: {missing}"
    undocumented = [f"hookline {flag}" for flag in _options(group) if f"`{flag}" not in text]
    for name, command in group.commands.items():
        undocumented += [f"hookline {name} {flag}" for flag in _options(command)
                         if f"`{flag}" not in text]
    assert not undocumented, f"options missing from docs/cli.md: {undocumented}"


def test_every_hook_entry_states_the_spec_kind() -> None:
    """Each hook's '- **Kind:**' line and its row in the index table name the kind its
    spec declares (`first`, `many`, `first_sync` or `many_sync`)."""
    stated: dict[str, str] = {}
    for page in sorted((DOCS / "hooks").glob("*.md")):
        sections = re.split(r"^## ", page.read_text("utf-8"), flags=re.MULTILINE)
        for section in sections[1:]:
            name = section.split("\n", 1)[0].strip()
            kind = re.search(r"^- \*\*Kind:\*\* `(\w+)`", section, re.MULTILINE)
            if name in HOOK_SPECS:
                stated[name] = kind.group(1) if kind else "(none)"
    assert stated == {name: spec.kind for name, spec in HOOK_SPECS.items()}
    rows = re.findall(r"^\| \d+ \| \[(\w+)\]\([^)]*\) \| \w+ \| (\w+) \|",
                      (DOCS / "hooks" / "index.md").read_text("utf-8"), re.MULTILINE)
    assert dict(rows) == {name: spec.kind for name, spec in HOOK_SPECS.items()}
