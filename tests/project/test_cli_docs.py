"""docs/cli.md, with cli-server.md and cli-data.md, covers the real command line: every
command, subcommand and option of `hookline --help` (walked on the click command tree
typer builds) is documented in its command's section, and every command and option the
pages' synopses name exists."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from hookline.cli.app import create_app
from hookline.kernel.framework.core import Framework

DOCS = Path(__file__).resolve().parents[2] / "docs"
CLI_PAGES = ("cli.md", "cli-server.md", "cli-data.md")
"""The command-line reference: the root command and `run` and `chat`, then the rest."""


def commands() -> dict[str, set[str]]:
    """`hookline ...` command path -> its option spellings (`--json`, `-y`, ...)."""
    framework = Framework()
    framework.load_hooks()
    root = typer.main.get_command(create_app(framework))

    def walk(command: Any, path: str) -> Iterator[tuple[str, Any]]:
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")

    return {path: {spelling for param in command.params if param.param_type_name == "option"
                   for spelling in (*param.opts, *param.secondary_opts)}
            for path, command in walk(root, "hookline")}


def sections() -> dict[str, str]:
    """`hookline <name>` heading -> the text of its section; the page's top part is
    the root command's."""
    text = "\n".join((DOCS / page).read_text(encoding="utf-8") for page in CLI_PAGES)
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    found = {"hookline": parts[0]}
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        found[heading.strip()] = body
        if heading.strip() == "Global options":
            found["hookline"] += body
    return found


def section_of(path: str, pages: dict[str, str]) -> str:
    top = " ".join(path.split()[:2])
    assert top in pages, f"docs/cli.md has no '## {top}' section"
    return pages[top]


@pytest.mark.parametrize("path", sorted(commands()))
def test_every_command_and_option_is_documented(path: str) -> None:
    pages = sections()
    section = section_of(path, pages)
    if len(path.split()) > 2:
        assert re.search(rf"^{re.escape(path)}\b", section, re.MULTILINE), (
            f"the '## {' '.join(path.split()[:2])}' section of docs/cli.md has no synopsis "
            f"line for '{path}'")
    missing = sorted(option for option in commands()[path]
                     if not re.search(rf"[`\[]{re.escape(option)}\b", section))
    assert not missing, f"docs/cli.md does not document {missing} of '{path}'"


def test_every_documented_command_and_option_exists() -> None:
    real = commands()
    pages = sections()
    for heading, body in pages.items():
        if not heading.startswith("hookline "):
            continue
        # Synopsis lines: `hookline <command> ...` (output lines such as "hookline gateway:
        # running ..." are not commands).
        for line in re.findall(r"^hookline [a-z][a-z-]*(?: .*)?$", body, re.MULTILINE):
            words = [word for word in line.split() if re.fullmatch(r"[a-z][a-z-]*", word)]
            path = "hookline"
            for word in words:
                if f"{path} {word}" in real:
                    path = f"{path} {word}"
            assert path != "hookline", f"docs/cli.md names a command that does not exist: {line}"
            for option in re.findall(r"\[(-{1,2}[a-z][a-z-]*)", line):
                assert option in real[path] | real["hookline"], (
                    f"docs/cli.md's synopsis '{line}' names {option}, which '{path}' lacks")
