"""Typed hooks (kernel/typed.py): every hook of HOOK_SPECS has its two protocols, equal to
its spec, and mypy holds plugins to them.

- Sync with the specs: for each hook, ``<Hook>Hook`` (a method named after the hook) and
  ``<Hook>Impl`` (``__call__``) take the spec's parameters, keyword-only, in spec order,
  with the spec's annotations; they return the spec's type, wrapped in ``MaybeAwaitable``
  when the hook is dispatched on an async path (kinds ``first`` and ``many``).
- mypy, in a subprocess on copies of typed_samples/: the correct plugin (all 27 hooks, in
  every form the kernel accepts) gives no error; the incorrect one gives exactly the
  expected error lines, each on the line of its mistake. The examples of
  docs/typed-hooks.md are checked the same way, the reported output word for word.
- At run time the correct plugins register and answer: a protocol base adds no
  implementation and ``**_: object`` receives nothing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import hookline.kernel as kernel
from hookline.kernel import HOOK_SPECS, HooklineSpecs, HookRuntime, Registry, typed
from hookline.kernel.typed import HOOK_PROTOCOLS, IMPL_PROTOCOLS

SAMPLES = Path(__file__).with_name("typed_samples")
TYPED_HOOKS_PAGE = Path(__file__).resolve().parents[3] / "docs" / "typed-hooks.md"
ACRONYMS = {"cli": "CLI", "llm": "LLM"}
ASYNC_KINDS = {"first", "many"}
# What the annotations of hooks.py and typed.py name under TYPE_CHECKING.
NAMESPACE: dict[str, Any] = {
    **{name: getattr(kernel, name) for name in kernel.__all__},
    "Any": Any, "AsyncIterator": AsyncIterator, "Iterator": Iterator, "Path": Path,
}


def stem(hook: str) -> str:
    """The class-name stem of a hook: ``before_llm_call`` -> ``BeforeLLMCall`` (PEP 8
    capitalises acronyms)."""
    return "".join(ACRONYMS.get(part, part.title()) for part in hook.split("_"))


def typed_signature(function: Callable[..., Any]) -> list[inspect.Parameter]:
    """The parameters of a protocol method after ``self``."""
    return list(inspect.signature(function).parameters.values())[1:]


# -- in sync with HOOK_SPECS --------------------------------------------------------------


def test_the_mappings_list_every_hook_in_spec_order() -> None:
    assert list(HOOK_PROTOCOLS) == list(HOOK_SPECS)
    assert list(IMPL_PROTOCOLS) == list(HOOK_SPECS)
    protocols = {name for name in typed.__all__ if name.endswith(("Hook", "Impl"))}
    listed = {cls.__name__ for cls in [*HOOK_PROTOCOLS.values(), *IMPL_PROTOCOLS.values()]}
    assert protocols == listed


def test_every_name_of_the_module_is_exported_from_the_root() -> None:
    missing = [name for name in typed.__all__ if name not in kernel.__all__]
    assert not missing, f"add to hookline.kernel's exports: {missing}"


@pytest.mark.parametrize("name", list(HOOK_SPECS))
def test_each_hook_has_both_protocols_with_its_spec_signature(name: str) -> None:
    spec = HOOK_SPECS[name]
    spec_function = getattr(HooklineSpecs, name)
    spec_hints = typing.get_type_hints(spec_function, localns=NAMESPACE)
    spec_text = spec_function.__annotations__
    returns = spec_hints["return"]
    if spec.kind in ASYNC_KINDS:
        expected_return, expected_text = returns | Awaitable[returns], (
            f"MaybeAwaitable[{spec_text['return']}]")
    else:
        expected_return, expected_text = returns, spec_text["return"]

    hook, impl = HOOK_PROTOCOLS[name], IMPL_PROTOCOLS[name]
    assert (hook.__name__, impl.__name__) == (f"{stem(name)}Hook", f"{stem(name)}Impl")
    for protocol, member in ((hook, name), (impl, "__call__")):
        assert getattr(protocol, "_is_protocol", False), protocol
        assert getattr(typed, protocol.__name__) is protocol
        assert getattr(kernel, protocol.__name__) is protocol
        own = [attr for attr in vars(protocol) if not attr.startswith("_")]
        assert own == ([name] if protocol is hook else []), protocol
        function = getattr(protocol, member)
        params = typed_signature(function)
        where = f"{protocol.__name__}.{member}"
        assert [p.name for p in params] == list(spec.params), where
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is p.empty
                   for p in params), f"{where}: parameters are keyword-only, without defaults"
        hints = typing.get_type_hints(function, localns=NAMESPACE)
        text = function.__annotations__
        for param in spec.params:
            assert hints[param] == spec_hints[param], f"{where}({param})"
            assert text[param] == spec_text[param], f"{where}({param}): as the spec writes it"
        assert hints["return"] == expected_return, f"{where} returns"
        assert text["return"] == expected_text, f"{where} returns, as written"


def test_maybe_awaitable_is_the_value_or_an_awaitable_of_it() -> None:
    assert typed.MaybeAwaitable[int] == int | Awaitable[int]


# -- mypy ---------------------------------------------------------------------------------


# The incorrect plugin's mistakes: the comment on each mistake's line -> mypy's error.
BAD_ERRORS = {
    "# wrong parameter type": 'Signature of "system_prompt" incompatible with supertype '
                              '"hookline.kernel.typed.SystemPromptHook"  [override]',
    "# wrong return type": 'Signature of "load_state" incompatible with supertype '
                           '"hookline.kernel.typed.LoadStateHook"  [override]',
    "# misspelled parameter": 'Signature of "save_state" incompatible with supertype '
                              '"hookline.kernel.typed.SaveStateHook"  [override]',
    "# async on a sync path": 'Signature of "system_prompt" incompatible with supertype '
                              '"hookline.kernel.typed.SystemPromptHook"  [override]',
    "# assignment: the parameter above": 'Incompatible types in assignment (expression has '
                                         'type "Unchecked", variable has type '
                                         '"ResolveSessionHook")  [assignment]',
    "# function: wrong return type": 'Incompatible types in assignment (expression has type '
                                     '"Callable[[Any], str]", variable has type '
                                     '"DispatchOutboundImpl")  [assignment]',
}
# For each mistake, the note that shows it: the implementation's signature as mypy reads it.
BAD_NOTES = {
    "# wrong parameter type":
        "def system_prompt(self, prompt: int, state: dict[str, Any]) -> str",
    "# wrong return type": "def load_state(self, message: Any, session_id: str) -> str",
    "# misspelled parameter": "def save_state(self, session_id: str, state: dict[str, Any], "
                              "mesage: Any, model_output: str) -> None",
    "# async on a sync path": "def system_prompt(self, prompt: str | list[dict[str, Any]], "
                              "state: dict[str, Any]) -> Coroutine[Any, Any, str]",
    "# assignment: the parameter above":
        "def resolve_session(self, message: Any, session: str) -> str",
    "# function: wrong return type": '"DispatchOutboundImpl.__call__" has type "def '
                                     '__call__(self, *, message: Any) -> bool | '
                                     'Awaitable[bool | None] | None"',
}
MYPY_COMMAND = re.compile(r"`python -m mypy --strict (\w+\.py)` reports:")


class Mypy:
    """mypy on files of one folder, against the kernel this test imports.

    mypy cannot follow the import hook of an editable install, so (as .ci/run does) the
    kernel is linked as ``hookline/kernel`` in a folder on ``MYPYPATH``. An empty config
    file keeps the project's and the user's settings out; the cache is private and shared
    by the runs of this module."""

    def __init__(self, root: Path) -> None:
        self.folder = root / "files"
        self.folder.mkdir()
        (root / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")
        (root / "path" / "hookline").mkdir(parents=True)
        (root / "path" / "hookline" / "kernel").symlink_to(Path(kernel.__file__).parent)
        self.env = {**os.environ, "MYPYPATH": str(root / "path")}
        self.options = ["--config-file", str(root / "mypy.ini"), "--cache-dir",
                        str(root / "cache"), "--strict", "--follow-imports", "silent",
                        "--no-pretty", "--no-color-output"]

    def run(self, files: list[str], *options: str) -> list[str]:
        """mypy's output lines (the exit status is 1 when it reports an error)."""
        done = subprocess.run([sys.executable, "-m", "mypy", *self.options, *options, *files],
                              cwd=self.folder, env=self.env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        return done.stdout.splitlines()


@pytest.fixture(scope="module")
def mypy(tmp_path_factory: pytest.TempPathFactory) -> Mypy:
    assert importlib.util.find_spec("mypy"), "install the test extra: pip install -e '.[test]'"
    return Mypy(tmp_path_factory.mktemp("typed-hooks"))


@pytest.fixture(scope="module")
def samples(mypy: Mypy) -> dict[str, list[str]]:
    """mypy's lines about each sample plugin, from one run on both."""
    names = ["good_plugin.py", "bad_plugin.py"]
    for name in names:
        shutil.copy(SAMPLES / name, mypy.folder / name)
    lines = mypy.run(names, "--no-error-summary")
    by_file: dict[str, list[str]] = {name: [] for name in names}
    for line in lines:
        by_file[line.split(":", 1)[0]].append(line)
    return by_file


@pytest.mark.slow
def test_mypy_accepts_the_correct_plugin(samples: dict[str, list[str]]) -> None:
    assert samples["good_plugin.py"] == []


@pytest.mark.slow
def test_mypy_reports_each_mistake_of_the_incorrect_plugin(
    samples: dict[str, list[str]],
) -> None:
    source = (SAMPLES / "bad_plugin.py").read_text(encoding="utf-8").splitlines()
    lines = {marker: next(number for number, text in enumerate(source, 1)
                          if text.endswith(marker))
             for marker in BAD_ERRORS}
    reported = samples["bad_plugin.py"]
    errors = [line for line in reported if ": error: " in line]
    assert errors == [f"bad_plugin.py:{lines[marker]}: error: {message}"
                      for marker, message in BAD_ERRORS.items()]
    for marker, note in BAD_NOTES.items():
        notes = [line.split(": note: ", 1)[1].strip() for line in reported
                 if line.startswith(f"bad_plugin.py:{lines[marker]}: note: ")]
        assert note in notes, (marker, notes)


def docs_examples() -> list[tuple[int, str, str | None, list[str]]]:
    """``(line, code, file name, expected mypy output)`` of each python block of
    docs/typed-hooks.md; the file name is None for a block that is not followed by a
    `python -m mypy --strict <file>` output (it must check cleanly)."""
    section = TYPED_HOOKS_PAGE.read_text(encoding="utf-8").split("\n")
    offset = 1  # section[i] is the page's line i + 1
    found: list[tuple[int, str, str | None, list[str]]] = []
    index = 0
    while index < len(section):
        if section[index] != "```python":
            index += 1
            continue
        close = section.index("```", index + 1)
        code = "\n".join(section[index + 1:close])
        rest = section[close + 1:]
        following = next((line for line in rest if line.strip()), "")
        command = MYPY_COMMAND.fullmatch(following)
        expected: list[str] = []
        if command:
            output_start = rest.index("```text") + 1
            expected = rest[output_start:rest.index("```", output_start)]
        found.append((offset + index, code, command.group(1) if command else None, expected))
        index = close + 1
    return found


@pytest.mark.slow
def test_the_documented_mypy_runs_report_what_the_page_shows(mypy: Mypy) -> None:
    examples = docs_examples()
    assert any(name for _, _, name, _ in examples), "the section shows a mistake"
    assert any(name is None for _, _, name, _ in examples), "and a correct plugin"
    for line, code, name, expected in examples:
        file = name or f"docs_example_{line}.py"
        (mypy.folder / file).write_text(code + "\n", encoding="utf-8")
        if name is None:
            reported = mypy.run([file], "--no-error-summary")
            assert reported == [], f"docs/typed-hooks.md:{line}: {reported}"
        else:
            assert mypy.run([file]) == expected, f"docs/typed-hooks.md:{line}"


# -- at run time ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_plugin() -> Iterator[ModuleType]:
    """The correct sample, imported as the module `good_plugin` that mypy checked."""
    spec = importlib.util.spec_from_file_location("good_plugin", SAMPLES / "good_plugin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["good_plugin"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["good_plugin"]


def test_plugins_with_protocol_bases_register_exactly_their_own_implementations(
    good_plugin: ModuleType,
) -> None:
    registry = Registry(HOOK_SPECS)
    plugins: dict[str, object] = {
        "turns": good_plugin.TurnHooks("chat"), "resources": good_plugin.Resources(),
        "interception": good_plugin.Interception, "renamed": good_plugin.Renamed(),
        "module": good_plugin,
    }
    for name, plugin in plugins.items():
        registry.register(plugin, name=name)
    for name in ("turns", "resources", "interception"):
        cls = plugins[name] if name == "interception" else type(plugins[name])
        declared = {hook for hook, protocol in HOOK_PROTOCOLS.items()
                    if protocol in cls.__mro__}  # type: ignore[union-attr]
        assert registry.plugin_hooks(name) == declared, name
    assert registry.plugin_hooks("renamed") == {"load_state", "provide_lifespan"}
    assert registry.plugin_hooks("module") == {"dispatch_outbound"}
    assert set().union(*(registry.plugin_hooks(name) for name in plugins)) == set(HOOK_SPECS)


def test_the_typed_implementations_answer(good_plugin: ModuleType) -> None:
    registry = Registry(HOOK_SPECS)
    registry.register(good_plugin.TurnHooks("chat"), name="turns")
    registry.register(good_plugin.Resources(), name="resources")
    registry.register(good_plugin.Renamed(), name="renamed")
    runtime = HookRuntime(registry)
    assert runtime.call_first_sync("resolve_session", message={"chat_id": 7}) == "chat:7"
    assert runtime.call_many_sync("system_prompt", prompt="hi", state={}) == ["be brief"]
    states = asyncio.run(runtime.call_many("load_state", message={}, session_id="s"))
    assert states == [{"clock": "frozen"}, {"session": "s"}]
