"""The settings tables of the docs agree with the table of settings in the code.

docs/configuration.md lists every setting once, with its key, its variable and its
default; docs/security.md repeats the security settings where a reader of that page needs
them, and each row it has must be right too. A setting added to `Settings` without its
docs row, a renamed variable or a changed default fails here, naming the row and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hookline.builtins.config.table import BY_KEY, SPECS, Spec

DOCS = Path(__file__).resolve().parents[3] / "docs"
CONFIGURATION_HEADER = "| File key | Environment variable | Value | Default |"
SECURITY_HEADER = "| Setting | Variable | Default | Meaning |"
_LITERAL = re.compile(r"`([^`]+)`")


def table_rows(text: str, header: str) -> list[tuple[int, list[str]]]:
    """The rows (line number, cells) of the Markdown table under `header`."""
    lines = text.split("\n")
    start = lines.index(header)
    rows = []
    for number, line in enumerate(lines[start + 2:], start + 3):
        if not line.startswith("|"):
            break
        rows.append((number, [cell.strip() for cell in line.strip().strip("|").split("|")]))
    return rows


def shown_default(spec: Spec) -> str | None:
    """The Default cell a setting's row must have, or None when its default is no value
    and the docs say in words what applies instead."""
    value: Any = spec.default
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, tuple) and value:
        return ", ".join(f"`{item}`" for item in value)
    if value not in (None, (), {}):
        return f"`{value}`"
    return f"`{spec.unset}`" if spec.unset else None


def problems(text: str, page: str, header: str, *, key_col: int, env_col: int,
             default_col: int, complete: bool) -> list[str]:
    """What is wrong with `page`'s settings table, one line per problem saying the fix."""
    found: list[str] = []
    seen: dict[str, int] = {}
    for number, cells in table_rows(text, header):
        keys = _LITERAL.findall(cells[key_col])
        where = f"{page}:{number} ({', '.join(keys) if keys else repr(cells[key_col])})"
        unknown = [key for key in keys if key not in BY_KEY]
        if not keys or unknown:
            found.append(f"{where}: {', '.join(unknown) or 'no key'} is not a setting of "
                         "Settings: remove the row or fix the key")
            continue
        for key in keys:
            if key in seen:
                found.append(f"{where}: {key} is listed again (first on line {seen[key]})")
            seen[key] = number
        expected_envs = [BY_KEY[key].env for key in keys]
        if _LITERAL.findall(cells[env_col]) != expected_envs:
            found.append(f"{where}: the variable cell is {cells[env_col]!r}; write "
                         f"{', '.join(f'`{env}`' for env in expected_envs)}")
        parts = cells[default_col].split(", ")
        defaults = parts if len(keys) > 1 and len(parts) == len(keys) else [cells[default_col]]
        for key, cell in zip(keys, defaults * len(keys) if len(defaults) == 1 else defaults,
                             strict=True):
            expected = shown_default(BY_KEY[key])
            if expected is not None and cell != expected:
                found.append(f"{where}: the default of {key} is {expected}, the docs say "
                             f"{cell!r}")
            elif expected is None and (not cell or _LITERAL.fullmatch(cell)):
                found.append(f"{where}: {key} has no default value, the docs say {cell!r}; "
                             "say in words what applies when it is unset (or 'none')")
    if complete:
        for spec in SPECS:
            if spec.key not in seen:
                found.append(f"{page}: no row for `{spec.key}` ({spec.env}, default "
                             f"{shown_default(spec) or 'none'}): add one to the settings table")
    return found


def configuration_problems(text: str) -> list[str]:
    return problems(text, "docs/configuration.md", CONFIGURATION_HEADER, key_col=0, env_col=1,
                    default_col=3, complete=True)


def security_problems(text: str) -> list[str]:
    return problems(text, "docs/security.md", SECURITY_HEADER, key_col=0, env_col=1,
                    default_col=2, complete=False)


def test_the_configuration_table_lists_every_setting_rightly() -> None:
    assert configuration_problems((DOCS / "configuration.md").read_text("utf-8")) == []


def test_the_security_table_rows_are_right() -> None:
    text = (DOCS / "security.md").read_text("utf-8")
    assert len(table_rows(text, SECURITY_HEADER)) >= 10
    assert security_problems(text) == []


def test_the_blank_means_unset_sentence_names_those_settings() -> None:
    text = (DOCS / "configuration.md").read_text("utf-8")
    paragraph = re.search(r"In the file, an empty string for (.*?) counts as unset", text, re.S)
    assert paragraph is not None
    named = _LITERAL.findall(paragraph.group(1))
    assert named == [spec.key for spec in SPECS if spec.blank_unset]


def test_a_wrong_missing_or_unknown_row_is_named() -> None:
    """The check fails, saying which row and what to write, for each kind of mistake."""
    text = (DOCS / "configuration.md").read_text("utf-8")
    changed_default = text.replace("| `HOOKLINE_MAX_STEPS` | a positive integer: model calls "
                                   "per run | `20` |", "| `HOOKLINE_MAX_STEPS` | a positive "
                                   "integer: model calls per run | `30` |")
    assert changed_default != text
    [problem] = configuration_problems(changed_default)
    assert "(max_steps): the default of max_steps is `20`, the docs say '`30`'" in problem

    row = next(line for line in text.split("\n") if line.startswith("| `http_port` |"))
    [problem] = configuration_problems(text.replace(row + "\n", ""))
    assert problem == ("docs/configuration.md: no row for `http_port` (HOOKLINE_HTTP_PORT, "
                       "default `8787`): add one to the settings table")

    [problem] = configuration_problems(text.replace("`HOOKLINE_TOOL_ENV_DROP`",
                                                    "`HOOKLINE_TOOLS_DROP`"))
    assert "(tool_env_keep, tool_env_drop): the variable cell is" in problem
    assert "write `HOOKLINE_TOOL_ENV_KEEP`, `HOOKLINE_TOOL_ENV_DROP`" in problem

    unknown = text.replace(row, row + "\n| `http_ports` | `HOOKLINE_HTTP_PORTS` | x | none |")
    [problem] = configuration_problems(unknown)
    assert "http_ports is not a setting of Settings" in problem

    literal = text.replace("| `HOOKLINE_MAX_TOKENS` | a positive integer: output tokens per "
                           "model call | the provider's |", "| `HOOKLINE_MAX_TOKENS` | a "
                           "positive integer: output tokens per model call | `4096` |")
    assert literal != text
    [problem] = configuration_problems(literal)
    assert "max_tokens has no default value, the docs say '`4096`'" in problem

    security = (DOCS / "security.md").read_text("utf-8")
    [problem] = security_problems(security.replace("| `filtered`, none, none |",
                                                   "| `inherit`, none, none |"))
    assert "the default of tool_env is `filtered`, the docs say '`inherit`'" in problem
