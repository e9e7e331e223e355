"""Every limit a builtin tool's schema declares is enforced, by the one validator
(`hookline.kernel.tools.validate_arguments`), before the tool does anything.

The cases are made from the schemas themselves, so a limit added to a schema is tested
as soon as it exists, and a keyword these tests do not know fails them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hookline.builtins.config import Settings
from hookline.builtins.host.tools import builtin_tools
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.store import InMemoryTapeStore
from hookline.builtins.tape.tape import Tape
from hookline.builtins.tape.tools import SEARCH_LIMIT_MAX, SPILL_READ_MAX, spill_tools, tape_tools
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.framework.core import Framework
from hookline.kernel.tools import Tool, ToolContext, validate_arguments

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.name != "posix", reason="the shell tool needs a POSIX shell"),
]

ALL_TOOLS = [*builtin_tools(), *tape_tools(), *spill_tools()]

# Arguments that pass: each tool would act on them (run, write, edit, hand off), so a bad
# argument that slipped through would leave a trace in the workspace or on the tape.
VALID: dict[str, dict[str, Any]] = {
    "shell": {"command": "touch ran"},
    "shell.output": {"id": "bg1"},
    "shell.stop": {"id": "bg1"},
    "fs.read": {"path": "a.txt"},
    "fs.write": {"path": "written.txt", "content": "x"},
    "fs.edit": {"path": "a.txt", "old": "a", "new": "b"},
    "tape.info": {},
    "tape.search": {"query": "needle"},
    "tape.handoff": {"name": "phase/2"},
    "spill.read": {"id": "spill-000000000000"},
}

ANNOTATIONS = {"description", "default"}
LIMITS = {"type", "minimum", "maximum", "minLength", "maxLength", "enum"}
WRONG_TYPE = {"string": 5, "integer": "1", "boolean": "yes"}


def violations() -> list[tuple[str, dict[str, Any], str]]:
    """(tool, arguments, expected message part) for every limit in every schema."""
    cases = []
    for tool in ALL_TOOLS:
        schema = tool.parameters
        base = VALID[tool.name]
        assert set(schema) <= {"type", "properties", "required", "additionalProperties"}
        for name in schema.get("required", []):
            missing = {key: value for key, value in base.items() if key != name}
            cases.append((tool.name, missing, f"missing required argument {name!r}"))
        if schema.get("additionalProperties") is False:
            cases.append((tool.name, {**base, "extra": 1}, "unknown argument 'extra'"))
        for name, prop in schema["properties"].items():
            unknown = set(prop) - ANNOTATIONS - LIMITS
            assert not unknown, f"{tool.name}.{name}: no test for {unknown}"
            kind = prop["type"]
            article = "an" if kind == "integer" else "a"
            cases.append((tool.name, {**base, name: WRONG_TYPE[kind]},
                          f"{name!r} must be {article} {kind}, got "))
            if "minimum" in prop:
                low = prop["minimum"]
                cases.append((tool.name, {**base, name: low - 1}, f"got {low - 1}"))
            if "maximum" in prop:
                high = prop["maximum"]
                cases.append((tool.name, {**base, name: high + 1}, f"got {high + 1}"))
            if "minLength" in prop:
                short = "x" * (prop["minLength"] - 1)
                cases.append((tool.name, {**base, name: short}, f"{name!r} must "))
            if "maxLength" in prop:
                long = "x" * (prop["maxLength"] + 1)
                cases.append((tool.name, {**base, name: long}, f"{name!r} must be at most"))
            if "enum" in prop:
                cases.append((tool.name, {**base, name: "none-of-the-choices"},
                              f"{name!r} must be one of"))
    return cases


def boundaries() -> list[tuple[str, dict[str, Any], str, Any]]:
    """(tool, arguments, argument, value) at every limit, which must be accepted."""
    cases = []
    for tool in ALL_TOOLS:
        base = VALID[tool.name]
        for name, prop in tool.parameters["properties"].items():
            for key in ("minimum", "maximum"):
                if key in prop:
                    cases.append((tool.name, {**base, name: prop[key]}, name, prop[key]))
            for key in ("minLength", "maxLength"):
                if key in prop:
                    text = "y" * prop[key]
                    cases.append((tool.name, {**base, name: text}, name, text))
    return cases


def tool_named(name: str) -> Tool:
    return next(tool for tool in ALL_TOOLS if tool.name == name)


def snapshot(workspace: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in workspace.iterdir()}


def test_the_cases_cover_every_tool_and_every_declared_limit() -> None:
    assert {tool.name for tool in ALL_TOOLS} == set(VALID)
    declared = [(tool.name, name, key) for tool in ALL_TOOLS
                for name, prop in tool.parameters["properties"].items()
                for key in prop if key in LIMITS - {"type"}]
    # The limits the builtin schemas declare today (a new one makes new cases above).
    assert sorted(declared) == [
        ("fs.read", "limit", "minimum"),
        ("fs.read", "offset", "minimum"),
        ("shell", "escalate", "enum"),
        ("shell", "timeout", "minimum"),
        ("spill.read", "id", "minLength"),
        ("spill.read", "limit", "maximum"),
        ("spill.read", "limit", "minimum"),
        ("spill.read", "offset", "minimum"),
        ("tape.handoff", "name", "minLength"),
        ("tape.search", "limit", "maximum"),
        ("tape.search", "limit", "minimum"),
        ("tape.search", "query", "minLength"),
    ]
    assert len(violations()) >= len(declared) + len(ALL_TOOLS)


@pytest.mark.parametrize(("tool", "arguments", "fragment"), violations())
async def test_a_value_past_a_declared_limit_is_refused_before_the_tool_acts(
    tmp_path: Path, tool: str, arguments: dict[str, Any], fragment: str
) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    tape = Tape(InMemoryTapeStore(), "main")
    await tape.ensure_bootstrap_anchor()
    before_files, before_tape = snapshot(tmp_path), await tape.entries()
    context = ToolContext(tape=tape, state={"_runtime_workspace": str(tmp_path)})
    with pytest.raises(HooklineError) as caught:
        await tool_named(tool).invoke(arguments, context)
    error = caught.value
    assert error.kind is ErrorKind.invalid_input
    assert error.message.startswith(f"{tool}: ") and fragment in error.message
    assert error.details is not None and error.details["tool"] == tool
    assert "argument" in error.details
    assert snapshot(tmp_path) == before_files  # nothing ran, nothing was written
    assert await tape.entries() == before_tape


@pytest.mark.parametrize(("tool", "arguments", "name", "value"), boundaries())
def test_a_value_at_a_declared_limit_is_accepted(
    tool: str, arguments: dict[str, Any], name: str, value: Any
) -> None:
    checked = validate_arguments(tool, tool_named(tool).parameters, arguments)
    assert checked[name] == value


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("shell", {"command": "ls", "timeout": 0}, "shell: 'timeout' must be at least 1, got 0"),
        ("fs.read", {"path": "a", "offset": 0}, "fs.read: 'offset' must be at least 1, got 0"),
        ("fs.read", {"path": "a", "limit": 0}, "fs.read: 'limit' must be at least 1, got 0"),
        (
            "tape.search",
            {"query": "x", "limit": SEARCH_LIMIT_MAX + 1},
            f"tape.search: 'limit' must be from 1 to {SEARCH_LIMIT_MAX}, got 101",
        ),
        ("tape.search", {"query": ""}, "tape.search: 'query' must not be empty, got \"\""),
        ("tape.handoff", {"name": ""}, "tape.handoff: 'name' must not be empty, got \"\""),
        ("spill.read", {"id": ""}, "spill.read: 'id' must not be empty, got \"\""),
        ("spill.read", {"id": " "}, "spill.read: 'id' must not be blank, got \" \""),
        ("spill.read", {"id": 7}, "spill.read: 'id' must be a string, got integer 7"),
        (
            "spill.read",
            {"id": "s", "offset": -1},
            "spill.read: 'offset' must be at least 0, got -1",
        ),
        (
            "spill.read",
            {"id": "s", "limit": 0},
            f"spill.read: 'limit' must be from 1 to {SPILL_READ_MAX}, got 0",
        ),
        (
            "spill.read",
            {"id": "s", "limit": SPILL_READ_MAX + 1},
            f"spill.read: 'limit' must be from 1 to {SPILL_READ_MAX}, got 10001",
        ),
        ("spill.read", {"id": "s", "page": 2}, "unknown argument 'page' (expected: id, offset, "),
    ],
)
async def test_the_messages_name_tool_argument_limit_and_value(
    tmp_path: Path, tool: str, arguments: dict[str, Any], message: str
) -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    context = ToolContext(tape=tape, state={"_runtime_workspace": str(tmp_path)})
    with pytest.raises(HooklineError) as caught:
        await tool_named(tool).invoke(arguments, context)
    assert caught.value.kind is ErrorKind.invalid_input
    assert message in caught.value.message


async def test_defaults_from_the_schema_reach_the_tool(tmp_path: Path) -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    await tape.ensure_bootstrap_anchor()
    for index in range(25):
        await tape.append("message", {"role": "user", "content": f"needle {index}"})
    found = await tool_named("tape.search").invoke({"query": "needle"}, ToolContext(tape=tape))
    assert len(found) == 20  # the schema's default limit
    found = await tool_named("tape.search").invoke(
        {"query": "needle", "limit": None}, ToolContext(tape=tape)
    )
    assert len(found) == 20  # a null counts as leaving the argument out


@pytest.mark.anyio
async def test_invalid_json_arguments_are_reported_as_such(tmp_path: Path) -> None:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([
        {"tool_calls": [{"name": "fs_read", "arguments": "{not json"}]},
        {"text": "done"},
    ]))
    framework = Framework(tmp_path)
    plugin = BuiltinPlugin(framework, settings=Settings(home=tmp_path / "home",
                                                        model=f"scripted:{script}"))
    framework.registry.register(plugin, name="builtin")
    async with framework.running():
        await framework.process_inbound({"content": "go"})
    model = plugin.get_agent().open_model(f"scripted:{script}")
    tool_message = model.calls[1].messages[-1]
    assert "not valid JSON" in tool_message.text and "_raw" not in tool_message.text
