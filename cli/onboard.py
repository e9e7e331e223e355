"""``hookline onboard``: ask (or take from flags) the model, its endpoint and its key,
check them with one real call, then write `<HOOKLINE_HOME>/config.toml`.

Kept out of ``app.py`` so the command can grow without weighing on the others' start-up.
The rules for values live in ``hookline.builtins.config`` (``parse_setting``,
``settings_from_config``) and the model is opened the way turns open it (``open_model``),
so onboarding accepts exactly what ``hookline run`` will accept.

Interactive when standard input is a terminal and ``--yes`` is not given; otherwise every
answer comes from a flag or is kept as it is, and a missing required one is one error
line naming the flag. Nothing is written unless every step succeeded (or the user, or
``--save-anyway``, said to save after a failed test call).
"""

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from hookline.kernel import Framework

from .output import fail

T = TypeVar("T")

CORE_KEYS = ("model", "api_base", "api_key", "api_key_env")
"""Top-level keys onboarding asks itself; plugins' proposals for them are its defaults."""
PROVIDER_KEYS = ("api_base", "api_key", "api_key_env", "api_format")
"""Keys that belong to one provider: not carried over when the provider changes."""
TEST_PROMPT = "Reply with OK"
TEST_TIMEOUT = 30.0
SHOWN_REPLY = 200
CANCELLED = "onboarding cancelled; nothing written"
EXAMPLE_BASE = "http://localhost:11434/v1"


class _Refused(ValueError):
    """An answer that cannot be used; the message says why (asked again interactively)."""


@dataclass(frozen=True)
class _Flags:
    model: str | None
    api_base: str | None
    api_key: str | None
    api_key_env: str | None

    def given(self) -> bool:
        return any(value is not None for value in
                   (self.model, self.api_base, self.api_key, self.api_key_env))


def onboard_command(framework: Framework) -> Any:
    def onboard(
        plugin: Annotated[
            str | None, typer.Option(metavar="NAME", help="Only this plugin's onboard_config.")
        ] = None,
        yes: Annotated[
            bool, typer.Option("--yes", "-y",
                               help="Ask nothing: take the flags, keep or accept the rest.")
        ] = False,
        model: Annotated[
            str | None,
            typer.Option("--model", "-m", metavar="SPEC",
                         help="Model spec: provider:model, offline or scripted:<path>."),
        ] = None,
        api_base: Annotated[
            str | None,
            typer.Option("--api-base", metavar="URL",
                         help="http(s) URL of the provider endpoint (needed by "
                              "openai-compatible)."),
        ] = None,
        api_key_env: Annotated[
            str | None,
            typer.Option("--api-key-env", metavar="NAME",
                         help="Read the key from this environment variable at run time."),
        ] = None,
        api_key: Annotated[
            str | None,
            typer.Option("--api-key", metavar="KEY",
                         help="Store this key in the file (it lands in your shell history: "
                              "prefer --api-key-env or the prompt)."),
        ] = None,
        no_test: Annotated[
            bool, typer.Option("--no-test", help="Skip the test call to the model.")
        ] = False,
        save_anyway: Annotated[
            bool, typer.Option("--save-anyway",
                               help="Write the file even when the test call fails.")
        ] = False,
    ) -> None:
        """Ask for the model, its endpoint and key, test them, and write the config file."""
        flags = _Flags(model, api_base, api_key, api_key_env)
        interactive = not yes and sys.stdin.isatty()
        try:
            _onboard(framework, flags, plugin=plugin, interactive=interactive, yes=yes,
                     test=not no_test, save_anyway=save_anyway)
        except typer.Abort as exc:  # Ctrl-C or end of input at a prompt
            _cancelled(130 if isinstance(exc.__context__, KeyboardInterrupt) else 1)
        except KeyboardInterrupt:  # Ctrl-C elsewhere (the test call)
            _cancelled(130)
        except EOFError:
            _cancelled(1)

    return onboard


def _cancelled(code: int) -> NoReturn:
    typer.echo(f"\n{CANCELLED}", err=True)
    raise typer.Exit(code)


def _onboard(framework: Framework, flags: _Flags, *, plugin: str | None, interactive: bool,
             yes: bool, test: bool, save_anyway: bool) -> None:
    from hookline.builtins.config import default_home

    path = default_home() / "config.toml"
    current = _read_config(path)
    from hookline.builtins.bub import set_onboard_interactive

    set_onboard_interactive(framework, interactive)  # Bub plugins ask only when we may
    try:  # first: an unknown --plugin is the error to report, whatever else is given
        proposed = framework.collect_onboard_config(current, plugin=plugin)
    except Exception as exc:  # bad fragments, invalid settings: one line, no traceback
        fail(exc)
    with_model = plugin in (None, "builtin")
    if flags.given() and not with_model:
        fail(ValueError(f"--model, --api-base, --api-key-env and --api-key configure the "
                        f"builtin model: leave out --plugin {plugin}, or use --plugin builtin"))
    if flags.api_key is not None and flags.api_key_env is not None:
        fail(ValueError("give either --api-key or --api-key-env, not both"))
    if not interactive and not yes and not flags.given():
        fail(ValueError(
            "standard input is not a terminal, so there is nothing to ask: pass the answers "
            "as flags (--model SPEC, and as the provider needs --api-base URL and "
            "--api-key-env NAME), or --yes to keep the current values "
            "(hookline onboard --help)"))
    if flags.api_key is not None:
        typer.echo("warning: --api-key puts the key in your shell history; prefer "
                   "--api-key-env NAME, or the hidden prompt of an interactive "
                   "hookline onboard", err=True)

    if interactive:
        typer.echo(f"Onboarding writes {path}. Enter keeps the value in brackets; Ctrl-C "
                   f"stops without writing anything.")

    from hookline.builtins.config import merge_config

    fragment = _ask_fragment(proposed, current, interactive, top=True)
    asked, answers = current, {}
    while True:
        if with_model:
            answers = _Questions(asked, proposed, flags, interactive).ask()
        config = merge_config(merge_config(proposed, fragment), answers)
        settings = _validated(config, path.parent, answers)
        verdict = _checked(config, settings, interactive=interactive, test=test,
                           save_anyway=save_anyway) if with_model else "save"
        while verdict == "retry":
            verdict = _checked(config, settings, interactive=interactive, test=test,
                               save_anyway=save_anyway)
        if verdict != "edit":
            break
        # Ask again with what was answered as the defaults: Enter keeps each answer.
        asked, flags = merge_config(current, answers), _Flags(None, None, None, None)
    if verdict != "save":
        fail(RuntimeError("nothing written: fix the answers and run hookline onboard again, "
                          "or pass --save-anyway to write the file all the same (--no-test "
                          "skips the call)"))
    _write(path, config, current)
    from hookline.builtins.bub import save_onboard_config

    try:  # Bub plugins read their answers from Bub's own config file
        bub_file = save_onboard_config(framework)
    except Exception as exc:  # Bub's validation of the answers: one line
        fail(RuntimeError(f"cannot write the Bub plugins' settings: {exc}"))
    if bub_file is not None:
        typer.echo(f"wrote the Bub plugins' settings to {bub_file}")


class _Questions:
    """The builtin model's questions, in order: model, endpoint, key. Each is answered by
    its flag, else asked (interactive), else kept from the file or the plugins' proposal."""

    def __init__(self, current: Mapping[str, Any], proposed: Mapping[str, Any], flags: _Flags,
                 interactive: bool) -> None:
        self.current = current
        self.proposed = proposed
        self.flags = flags
        self.interactive = interactive

    def ask(self) -> dict[str, Any]:
        """The top-level updates for the config file (None removes a key)."""
        default = str(self.current.get("model") or self.proposed.get("model") or "offline")
        spec = self._answer("--model SPEC", self.flags.model, "Model (provider:model, offline or "
                            "scripted:<path>)", default, _check_model)
        updates: dict[str, Any] = {"model": spec}
        provider = _provider(spec)
        if provider is None:  # offline, scripted: nothing to connect to, nothing to ask
            for flag, value in (("--api-base", self.flags.api_base),
                                ("--api-key", self.flags.api_key),
                                ("--api-key-env", self.flags.api_key_env)):
                if value is not None:
                    fail(ValueError(f"{flag} is for provider models; {spec} needs none"))
            return updates
        carried = self._carried(provider)
        updates.update({key: carried.get(key) for key in PROVIDER_KEYS})
        updates["api_base"] = self._api_base(spec, provider, carried.get("api_base"))
        updates.update(self._key(provider, carried))
        return updates

    def _carried(self, provider: str) -> dict[str, Any]:
        """The file's endpoint and key, when they were for this same provider."""
        values = {key: self.current[key] for key in PROVIDER_KEYS if key in self.current}
        before = _provider(str(self.current.get("model") or "offline"))
        if before is None or before == provider or not values:
            return values
        typer.echo(f"note: the provider changes from {before} to {provider}: "
                   f"{', '.join(values)} from the file are not kept", err=True)
        return {}

    def _answer(self, flag: str, given: str | None, question: str, default: str,
                check: Callable[[str], T]) -> T:
        """The flag's value checked (a bad one stops the command), else the interactive
        answer (asked again until it passes), else the default checked."""
        if given is not None:
            try:
                return check(given.strip())
            except _Refused as exc:
                fail(ValueError(f"{flag.split()[0]}: {exc}"))
        if not self.interactive:
            try:
                return check(default)
            except _Refused as exc:
                fail(ValueError(f"{exc}: pass {flag}"))
        while True:
            answer = typer.prompt(question, default=default, show_default=bool(default))
            try:
                return check(str(answer).strip())
            except _Refused as exc:
                typer.echo(f"  {exc}; try again", err=True)

    def _api_base(self, spec: str, provider: str, carried: str | None) -> str | None:
        from hookline.builtins.config import setting_env
        from hookline.builtins.models import NEEDS_API_BASE, env_prefix

        ours, theirs = setting_env("api_base"), f"{env_prefix(provider)}_API_BASE"
        from_env = [name for name in (ours, theirs) if os.environ.get(name, "").strip()]
        required = provider in NEEDS_API_BASE and not from_env
        fix = (f"{spec} needs the address of your server (for example {EXAMPLE_BASE}) and "
               f"none is set (no api_base, {ours} or {theirs})")

        def check(value: str) -> str | None:
            if not value:
                if required:
                    raise _Refused(fix)
                return None
            return str(_parse("api_base", value))

        if provider in NEEDS_API_BASE:
            question = f"API base URL of your server (for example {EXAMPLE_BASE})"
        else:
            question = f"API base URL (optional: Enter for {provider}'s own endpoint)"
        if from_env and provider in NEEDS_API_BASE and not self.flags.api_base:
            typer.echo(f"note: {from_env[0]} is set and gives the endpoint when the file "
                       f"has none", err=True)
        return self._answer("--api-base URL", self.flags.api_base, question, carried or "",
                            check)

    def _key(self, provider: str, carried: Mapping[str, Any]) -> dict[str, Any]:
        """`api_key` / `api_key_env` updates: one of them, or neither (None removes)."""
        if self.flags.api_key is not None:
            key = self.flags.api_key.strip()
            if not key:
                fail(ValueError("--api-key is empty"))
            return {"api_key": key, "api_key_env": None}
        if self.flags.api_key_env is not None:
            return {"api_key": None, "api_key_env": self._env_name("--api-key-env",
                                                                   self.flags.api_key_env)}
        kept = {"api_key": carried.get("api_key"), "api_key_env": carried.get("api_key_env")}
        if not self.interactive:
            return kept
        suggested = str(carried.get("api_key_env") or
                        f"{provider.upper().replace('-', '_')}_API_KEY")
        choices = ["type", "env", "none"]
        if kept["api_key"] or kept["api_key_env"]:
            choices.append("keep")
            default = "keep"
        elif os.environ.get(suggested, "").strip():
            default = "env"
        else:
            default = "none" if provider in ("openai-compatible", "ollama") else "type"
        typer.echo("The API key: type it now (hidden; stored in the file, readable by you "
                   "only), env (the name of an environment variable read at run time), none"
                   + (", or keep the current one" if "keep" in choices else ""))
        how = self._choice("API key source", choices, default)
        if how == "keep":
            return kept
        if how == "none":
            return {"api_key": None, "api_key_env": None}
        if how == "type":
            key = typer.prompt("API key (hidden)", hide_input=True)
            return {"api_key": str(key).strip(), "api_key_env": None}
        while True:
            name = typer.prompt("Environment variable holding the key", default=suggested)
            try:
                return {"api_key": None, "api_key_env": self._env_name(None, str(name))}
            except _Refused as exc:
                typer.echo(f"  {exc}; try again", err=True)

    def _choice(self, question: str, choices: list[str], default: str) -> str:
        return _ask_choice(question, choices, default)

    def _env_name(self, flag: str | None, name: str) -> str:
        try:
            checked = str(_parse("api_key_env", name.strip().removeprefix("$")))
        except _Refused as exc:
            if flag is None:
                raise
            fail(ValueError(f"{flag}: {exc}"))
        if not os.environ.get(checked, "").strip():
            typer.echo(f"note: {checked} is not set in this environment; export it before "
                       f"hookline runs (the test call needs it too)", err=True)
        return checked


def _ask_choice(question: str, choices: list[str], default: str) -> str:
    while True:
        answer = str(typer.prompt(f"{question} ({', '.join(choices)})", default=default))
        if answer.strip().lower() in choices:
            return answer.strip().lower()
        typer.echo(f"  answer one of {', '.join(choices)}", err=True)


def _ask_fragment(proposed: Mapping[str, Any], current: Any, interactive: bool, *,
                  top: bool = False, prefix: str = "") -> dict[str, Any]:
    """Plugins' proposed plain values that the file does not hold yet, confirmed one by
    one when interactive (the proposal as the default), accepted as they are otherwise.
    Values already in the file are kept without asking."""
    have = current if isinstance(current, Mapping) else {}
    result: dict[str, Any] = {}
    for key, value in proposed.items():
        if top and key in CORE_KEYS:
            continue
        if isinstance(value, dict):
            inner = _ask_fragment(value, have.get(key), interactive, prefix=f"{prefix}{key}.")
            if inner:
                result[key] = inner
        elif interactive and key not in have and isinstance(value, str | int | float | bool):
            secret = any(word in key.lower() for word in ("key", "token", "secret", "password"))
            result[key] = typer.prompt(f"{prefix}{key}", default=value, type=type(value),
                                       hide_input=secret, show_default=not secret)
    return result


def _check_model(spec: str) -> str:
    """A spec `hookline run` can open: the settings' syntax, and a provider republic knows."""
    checked = str(_parse("model", spec))
    provider = _provider(checked)
    if provider is not None:
        from hookline.builtins.models import known_providers

        known = known_providers()
        if provider not in known:
            raise _Refused(f"unknown provider {provider!r} in {checked!r}; known providers: "
                           f"{', '.join(known)} (or offline, scripted:<path>)")
    return checked


def _provider(spec: str) -> str | None:
    """The republic provider of a spec; None for the offline and scripted models."""
    if spec == "offline" or spec.startswith(("offline:", "scripted:")):
        return None
    return spec.partition(":")[0]


def _parse(key: str, value: str) -> Any:
    from hookline.builtins.config import SettingsError, parse_setting

    try:
        return parse_setting(key, value)
    except SettingsError as exc:
        raise _Refused(exc.message) from None


def _validated(config: Mapping[str, Any], home: Path, answers: Mapping[str, Any]) -> Any:
    """The Settings `config` gives once written, the whole file checked by the settings'
    own rules. Environment overrides of what was just answered are left out (and named):
    the test call is about the answers."""
    from hookline.builtins.config import settings_from_config

    shadowed = set(answers)  # an answer left blank too: the provider's own endpoint, say
    if shadowed & {"api_key", "api_key_env"}:
        shadowed |= {"api_key", "api_key_env"}
    environ = dict(os.environ)
    for key in sorted(shadowed):
        variable = f"HOOKLINE_{key.upper()}"
        if environ.pop(variable, "").strip():
            typer.echo(f"note: {variable} is set in this environment and overrides {key} "
                       f"from the file when hookline runs", err=True)
    try:
        settings = settings_from_config(config, environ, home)
    except Exception as exc:
        fail(exc)
    # Errors name where a value came from: these come from answers, not from the file,
    # which is not written yet.
    answered = {key: "onboard:your answers (not written yet)" for key in answers
                if settings.sources.get(key, "").startswith("file:")}
    return dataclasses.replace(settings, sources={**settings.sources, **answered})


def _checked(config: Mapping[str, Any], settings: Any, *, interactive: bool, test: bool,
             save_anyway: bool) -> str:
    """What to do: `save` (the test call passed, was skipped, or the user or --save-anyway
    chose to save after it failed), `edit` the answers, `retry` the call, or `quit`."""
    spec = str(config.get("model") or "offline")
    if _provider(spec) is None:
        typer.echo(f"no test call: {spec} runs locally")
        return "save"
    if not test:
        typer.echo("test call skipped (--no-test)")
        return "save"
    typer.echo(f"test call to {spec}: {TEST_PROMPT!r} ...")
    try:
        reply = _test_call(spec, settings)
    except Exception as exc:  # the model's own one-line error, shown as it is
        typer.echo(f"test call failed: {_one_line(exc)}", err=True)
        if interactive:
            typer.echo("Edit the answers (Enter keeps each one), retry the call, save the "
                       "file anyway, or quit without writing it.")
            return _ask_choice("What now", ["edit", "retry", "save", "quit"], "edit")
        if save_anyway:
            typer.echo("saving anyway (--save-anyway)", err=True)
        return "save" if save_anyway else "quit"
    shown = reply if len(reply) <= SHOWN_REPLY else reply[:SHOWN_REPLY] + "..."
    typer.echo(f"reply: {_one_line(shown) if shown.strip() else '(empty)'}")
    return "save"


def _test_call(spec: str, settings: Any) -> str:
    """The model's reply to a tiny prompt, through `open_model` as turns open it."""
    import contextlib

    import anyio

    from hookline.builtins.models import Finished, ModelMessage, TextDelta, open_model

    model = open_model(spec, settings, timeout=TEST_TIMEOUT, max_retries=0)

    async def call() -> str:
        parts: list[str] = []
        try:
            with anyio.fail_after(TEST_TIMEOUT):
                stream = model.stream([ModelMessage.user(TEST_PROMPT)])
                async with contextlib.aclosing(stream) as events:  # type: ignore[type-var]
                    async for event in events:
                        if isinstance(event, TextDelta):
                            parts.append(event.text)
                        elif isinstance(event, Finished):
                            return event.text or "".join(parts)
        except TimeoutError:
            raise TimeoutError(f"{spec}: no reply within {TEST_TIMEOUT:g} s") from None
        return "".join(parts)

    return anyio.run(call)


def _one_line(value: Any) -> str:
    """An error or a reply as one line, credentials in URLs taken out."""
    from hookline.builtins.privacy import redact_credentials

    from .blame import innermost

    if isinstance(value, BaseException):
        error = innermost(value)
        value = str(error) or type(error).__name__
    return redact_credentials(" ".join(str(value).split()))


def _write(path: Path, config: Mapping[str, Any], read: Mapping[str, Any]) -> None:
    """Write what onboarding changed of the file it `read`, into the file as it is now:
    what another command wrote meanwhile (an `mcp add` while the questions waited) stays."""
    from hookline.builtins.config import config_lock, merge_config, write_config

    try:  # a private temporary file renamed over the old one: never readable by others
        with config_lock(path):
            write_config(path, merge_config(_read_config(path), _changes(read, config)))
    except (OSError, TypeError, ValueError) as exc:
        fail(RuntimeError(f"cannot write {path}: {exc}"))
    held = " (it holds the API key: readable by you only)" if config.get("api_key") else ""
    typer.echo(f"wrote {path}{held}")
    typer.echo('try it: hookline run "hello"')


def _changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """What turns `before` into `after`, for `merge_config`: tables key by key, None for
    a key gone."""
    changes: dict[str, Any] = {key: None for key in before if key not in after}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            inner = _changes(old, value)
            if inner:
                changes[key] = inner
        elif value != old:
            changes[key] = value
    return changes


def _read_config(path: Path) -> dict[str, Any]:
    from hookline.builtins.config import read_config_file

    try:
        return read_config_file(path)
    except Exception as exc:  # unreadable, not TOML: one line naming the file and the fix
        fail(exc)
