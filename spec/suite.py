"""The conformance suite's command line: which fixtures, the outcome of each, the reports.

Every fixture ends with one outcome:

- ``PASS``;
- ``SKIP`` with the reason: it ``requires`` something the adapter does not ``support``,
  or it is a framework fixture and the adapter offers only the kernel protocol;
- ``XFAIL`` (failed as expected): the adapter's expected-failures file lists it, and
  its failure message contains every fragment the entry gives;
- ``FAIL`` with the rule id of the check that failed (the fixture's rule ids when no
  one check's rule is known): anything else, including an expected failure that passed
  or failed for another reason;
- ``TIMEOUT``: the fixture did not end within ``--timeout`` seconds (it is left running
  in its thread, and the suite goes on);
- ``ERROR``: the adapter raised outside a checked step (making the kernel or a plugin):
  the harness failed, so the fixture says nothing about the kernel.

The exit status is 0 when nothing is ``FAIL`` or ``TIMEOUT``, 1 otherwise, and 2 for
anything that is not a conformance result: an ``ERROR``, or a usage error (no fixture
found, a missing path, an unreadable expected-failures file, an adapter that cannot be
loaded or speaks a newer protocol, ``--backend trio`` without trio). The reports asked
for are written in every case, a usage error included. Python warnings raised while
fixtures run are recorded, never printed.

    python -m spec --adapter my_adapter:make --expected my_expected.toml \\
        --junit-xml suite.xml --json suite.json
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import json
import sys
import threading
import tomllib
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from . import runner

SUITE_VERSION = "0.1.0"
"""The suite's release: fixtures, rules and runner move together (hookline's version)."""

ADAPTER_PROTOCOL = 1
"""The adapter protocol this runner speaks (``runner.Adapter``; spec/README.md). An
adapter must say which one it was written for, in a ``protocol`` attribute."""


PASSED_UNEXPECTEDLY = "passed, but the expected-failures file says it fails"

COUNT_KINDS = ("pass", "fail", "skip", "xfail", "timeout", "error")
"""The outcomes a run counts: the keys of the JSON report's `counts`, always all six."""

WHY_PLACEHOLDER = "TODO: why this fails"
"""The ``why`` that ``--write-expected`` writes for a new entry, refused until replaced."""


class UsageError(Exception):
    """A problem with the command line or its files: exit status 2."""


@dataclass
class Outcome:
    fixture: str
    rules: list[str]
    outcome: str
    """``pass``, ``skip``, ``xfail``, ``fail``, ``timeout`` or ``error``."""
    message: str = ""
    why: str = ""
    warnings: list[str] = field(default_factory=list)
    failed_rule: str | None = None
    """For ``fail`` and ``xfail``: the rule of the check that failed (None when the
    failure is not one check's: set-up, or a fixture that does not say)."""

    @property
    def named_rules(self) -> list[str]:
        """The rules a report line names: the failed check's, else the fixture's."""
        return [self.failed_rule] if self.failed_rule else self.rules


def find_fixtures(paths: list[Path], areas: Sequence[str] = (),
                  rules: Sequence[str] = ()) -> list[Path]:
    """The fixture files named (as paths, or relative to the suite's fixtures folder),
    folders searched recursively; every fixture by default; then only those of the
    `areas` (the first folder under fixtures/: dispatch, framework, ...) and of the
    `rules` (a rule id, or a prefix ending with a dot)."""
    if not paths:
        paths = [runner.FIXTURE_DIR]
    found: list[Path] = []
    for path in paths:
        if not path.exists() and (runner.FIXTURE_DIR / path).exists():
            path = runner.FIXTURE_DIR / path
        if path.is_dir():
            found += runner.fixture_paths(path)
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"no such fixture file or folder: {path}")
    if areas:
        found = [path for path in found if _name(path).split("/")[0] in areas]
    if rules:
        found = [path for path in found if any(
            rule == wanted or (wanted.endswith(".") and rule.startswith(wanted))
            for rule in _rules_of(path) for wanted in rules)]
    if not found:
        given = [] if paths == [runner.FIXTURE_DIR] else [str(path) for path in paths]
        chosen = ", ".join([*given, *(f"--area {a}" for a in areas),
                            *(f"--rule {r}" for r in rules)])
        known = sorted(path.name for path in runner.FIXTURE_DIR.iterdir() if path.is_dir())
        hints = [f"areas are {', '.join(known)}"] if areas else []
        if any(not rule.endswith(".") for rule in rules):
            hints.append("a --rule is a whole rule id, or a prefix ending in '.' "
                         "(dispatch.order.)")
        raise UsageError(f"no fixture (*.toml) found for {chosen}"
                         + (f": {'; '.join(hints)}" if hints else ""))
    return found


def _rules_of(path: Path) -> list[str]:
    try:
        return runner.fixture_rules(path)
    except (OSError, tomllib.TOMLDecodeError):
        return []


def load_expected(path: Path | None) -> dict[str, dict[str, Any]]:
    """An expected-failures file: ``[fixtures."<path under fixtures/>"]`` tables with
    ``fails_with`` (fragments of the failure message) and ``why``. A bare file name that
    is not in the current folder is looked up beside the runner (the files it ships)."""
    if path is None:
        return {}
    if not path.exists() and path.parent == Path() and (runner.SPEC_DIR / path).is_file():
        path = runner.SPEC_DIR / path  # a file the suite ships: pluggy_expected.toml, ...
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read the expected-failures file {path}: {exc}") from None
    entries = data.get("fixtures", {})
    for name, entry in entries.items():
        if not isinstance(entry.get("fails_with"), list) or not entry.get("why"):
            raise UsageError(f"{path}: [fixtures.{name!r}] needs fails_with = [...] and why")
        if entry["why"] == WHY_PLACEHOLDER:
            raise UsageError(f"{path}: [fixtures.{name!r}] still has the placeholder why "
                             f"{WHY_PLACEHOLDER!r}: say why the fixture fails")
    return dict(entries)


def load_adapter(spec: str) -> runner.Adapter:
    """The adapter `spec` names: `path/to/file.py:factory` (that very file, whatever its
    name) or `module:factory` (imported). The suite's own modules live in its package, so
    neither form can pick one of them by mistake. Anything raised while loading, and an
    adapter that does not say which protocol it speaks, is a usage error."""
    source, _, attr = spec.rpartition(":") if spec.count(":") else (spec, "", "")
    source = source or spec
    try:
        if source.endswith(".py"):
            module = _module_from_file(Path(source))
        else:
            module = importlib.import_module(source)
        adapter = runner.adapter_from(getattr(module, attr or "adapter"))
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(f"cannot load the adapter {spec!r}: {type(exc).__name__}: "
                         f"{exc}") from None
    protocol = getattr(adapter, "protocol", None)
    if not isinstance(protocol, int):
        raise UsageError(f"the adapter {spec!r} does not say which adapter protocol it "
                         f"speaks: give it a class attribute protocol = {ADAPTER_PROTOCOL}")
    if protocol > ADAPTER_PROTOCOL:
        raise UsageError(f"the adapter {spec!r} speaks protocol {protocol}; this runner "
                         f"({SUITE_VERSION}) speaks {ADAPTER_PROTOCOL}: upgrade the suite")
    return adapter


def load_command_adapter(command: str, timeout: float) -> runner.Adapter:
    """The adapter for a kernel in a child process (``command_adapter.py``); a child that
    cannot be started or does not answer hello is a usage error."""
    from .command_adapter import CommandError, start

    try:
        return start(command, timeout, SUITE_VERSION)
    except CommandError as exc:
        raise UsageError(str(exc)) from None


def _module_from_file(path: Path) -> Any:
    """The module of an adapter file, under a name of its own (never one of the suite's)."""
    if not path.is_file():
        raise UsageError(f"no such adapter file: {path}")
    name = f"conformance_adapter_{abs(hash(str(path.resolve())))}"
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise UsageError(f"cannot load the adapter file {path}")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    sys.path.insert(0, str(path.resolve().parent))  # its own helper modules
    found.loader.exec_module(module)
    return module


class KernelOnly:
    """An adapter with its framework protocol hidden (``--kernel-only``): the runner then
    skips the framework fixtures as it does for a kernel-only adapter."""

    def __init__(self, adapter: runner.Adapter) -> None:
        self._adapter = adapter

    def __getattr__(self, name: str) -> Any:
        if name == "new_framework":
            raise AttributeError(name)
        return getattr(self._adapter, name)


def check_backend(backend: str) -> None:
    """The event loop library a backend other than asyncio needs, imported up front, so
    that its absence is a usage error rather than a traceback from the first fixture."""
    if backend == "asyncio":
        return
    try:
        import anyio  # noqa: F401
        import trio  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"--backend {backend} needs anyio and trio (pip install "
                         f"'hookline-conformance[trio]', or './spec[trio]' from a "
                         f"checkout): {exc}") from None


def _name(path: Path) -> str:
    resolved = path.resolve()
    if resolved.is_relative_to(runner.FIXTURE_DIR):
        return resolved.relative_to(runner.FIXTURE_DIR).as_posix()
    return str(path)


def play(path: Path, adapter: runner.Adapter, backend: str,
         expected: dict[str, dict[str, Any]], timeout: float = 60.0) -> Outcome:
    """Run one fixture (in a thread of its own, so that a hang is a ``timeout``) and
    classify it."""
    name = _name(path)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ended: list[Any] = []
        worker = threading.Thread(target=_run_into, args=(ended, path, adapter, backend),
                                  name=f"fixture {name}", daemon=True)
        worker.start()
        worker.join(timeout)
        outcome = _classify(name, _rules_of(path), expected.get(name), ended, timeout)
        ended.clear()  # a failure's traceback holds what the fixture made
        if outcome.outcome in ("fail", "xfail", "error"):
            # A failed fixture's objects (a coroutine the kernel left unclosed, ...) are
            # held in cycles by its failure: collected here, their warnings are this
            # fixture's, not stray lines at exit. A passing fixture leaves none.
            gc.collect()
    outcome.warnings = [f"{w.category.__name__}: {w.message}" for w in seen]
    return outcome


def _classify(name: str, rules: list[str], entry: dict[str, Any] | None, ended: list[Any],
              timeout: float) -> Outcome:
    """The outcome of a fixture from what its run left in `ended` (nothing: it hangs)."""
    if not ended:
        return Outcome(name, rules, "timeout", f"did not end within {timeout:g} s (--timeout)")
    result = ended[0]
    if isinstance(result, runner.FixtureFailure):
        message = str(result)
        if entry is not None and all(f in message for f in entry["fails_with"]):
            return Outcome(name, rules, "xfail", message, entry["why"], failed_rule=result.rule)
        if entry is not None:
            message = f"failed, but not as expected ({entry['why']}): {message}"
        return Outcome(name, rules, "fail", message, failed_rule=result.rule)
    if isinstance(result, BaseException):  # raised outside a checked step: the harness
        return Outcome(name, rules, "error", f"the adapter raised {type(result).__name__}: "
                                             f"{result} ({runner.raised_at(result)})")
    if result is not None:
        return Outcome(name, rules, "skip", result)
    if entry is not None:
        return Outcome(name, rules, "fail", f"{PASSED_UNEXPECTEDLY} ({entry['why']})")
    return Outcome(name, rules, "pass")


def _run_into(ended: list[Any], path: Path, adapter: runner.Adapter, backend: str) -> None:
    """`runner.run_sync`, its result or exception put in `ended`."""
    try:
        ended.append(runner.run_sync(path, adapter, backend))
    except BaseException as exc:  # handed to the main thread as it is
        ended.append(exc)


def write_junit(outcomes: list[Outcome], path: Path, adapter_name: str,
                error: str | None = None) -> None:
    """JUnit XML: a fail or timeout is a ``failure``, an error an ``error``; a usage
    error (nothing was played) is one ``error`` case named after it."""
    if error is not None:
        outcomes = [Outcome("(the suite did not run)", [], "error", error)]
    suite = ElementTree.Element("testsuite", {
        "name": f"hookline-conformance-{SUITE_VERSION}",
        "tests": str(len(outcomes)),
        "failures": str(sum(o.outcome in ("fail", "timeout") for o in outcomes)),
        "errors": str(sum(o.outcome == "error" for o in outcomes)),
        "skipped": str(sum(o.outcome in ("skip", "xfail") for o in outcomes)),
    })
    for outcome in outcomes:
        case = ElementTree.SubElement(suite, "testcase", {
            "classname": f"conformance.{adapter_name}", "name": outcome.fixture})
        if outcome.outcome in ("fail", "timeout", "error"):
            kind = "error" if outcome.outcome == "error" else "failure"
            failure = ElementTree.SubElement(case, kind, {
                "type": outcome.outcome.upper(),
                "message": f"[{', '.join(outcome.named_rules)}] "
                           f"{outcome.message.splitlines()[0]}"})
            failure.text = outcome.message
        elif outcome.outcome == "skip":
            ElementTree.SubElement(case, "skipped", {"message": outcome.message})
        elif outcome.outcome == "xfail":
            ElementTree.SubElement(case, "skipped", {
                "message": f"failed as expected: {outcome.why}", "type": "xfail"})
    ElementTree.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def write_json(path: Path, adapter: str, backend: str, counts: dict[str, int],
               outcomes: list[Outcome], error: str | None = None) -> None:
    report: dict[str, Any] = {
        "suite": SUITE_VERSION, "adapter_protocol": ADAPTER_PROTOCOL, "adapter": adapter,
        "backend": backend, "counts": counts, "fixtures": [asdict(o) for o in outcomes]}
    if error is not None:
        report["error"] = error
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def write_expected(path: Path, outcomes: list[Outcome],
                   known: dict[str, dict[str, Any]]) -> int:
    """Write the fixtures that fail now as an expected-failures file: each with the
    ``fails_with`` and ``why`` the current file gives when it still fails that way (its
    fragments may be chosen with care), else the first line of its failure and a
    placeholder ``why`` to fill in; the current file's entries for fixtures this run did
    not play (a narrower selection) are kept as they are. Returns how many."""
    failing = [o for o in outcomes if o.outcome in ("fail", "xfail")
               and not o.message.startswith(PASSED_UNEXPECTEDLY)]
    played = {o.fixture for o in outcomes}
    unplayed = {name: entry for name, entry in known.items() if name not in played}
    lines = [f"# Expected failures, written by --write-expected (suite {SUITE_VERSION}).",
             "# Say why each fails: the runner refuses an entry without a reason.", ""]
    for outcome in failing:
        message = outcome.message
        if message.startswith("failed, but not as expected"):
            message = message.split("): ", 1)[-1]
        entry = known.get(outcome.fixture) or {}
        fragments = (entry.get("fails_with") if outcome.outcome == "xfail" else None) or [
            message.splitlines()[0]]
        why = entry.get("why") or WHY_PLACEHOLDER
        lines += _entry_lines(outcome.fixture, fragments, why)
    for name, entry in sorted(unplayed.items()):  # not selected this run: kept as written
        lines += _entry_lines(name, entry.get("fails_with") or [],
                              entry.get("why") or WHY_PLACEHOLDER)
    path.write_text("\n".join(lines), encoding="utf-8")
    return len(failing) + len(unplayed)


def _entry_lines(fixture: str, fragments: Sequence[str], why: str) -> list[str]:
    """One expected failure as the file's TOML table."""
    return [f"[fixtures.{json.dumps(fixture)}]", f"fails_with = {json.dumps(list(fragments))}",
            f"why = {json.dumps(why)}", ""]


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Play the conformance fixtures against a kernel.")
    adapters = parser.add_mutually_exclusive_group()
    adapters.add_argument("--adapter", default=f"{__package__}.hookline_adapter:HooklineAdapter",
                          help="module:factory or path/to/file.py:factory returning the "
                               "adapter (hookline's, which needs hookline installed)")
    adapters.add_argument("--adapter-command", default=None, metavar="CMD",
                          help="a kernel in a child process speaking JSON lines on stdin/"
                               "stdout (docs/conformance-command.md); kernel fixtures only")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--expected", type=Path, default=None,
                        help="the adapter's expected-failures file (TOML)")
    parser.add_argument("--write-expected", type=Path, default=None, metavar="FILE",
                        help="write the fixtures failing now as an expected-failures file")
    parser.add_argument("--junit-xml", type=Path, default=None, help="write a JUnit report")
    parser.add_argument("--json", type=Path, default=None, help="write a JSON report")
    parser.add_argument("--area", action="append", default=[],
                        help="only the fixtures of this folder of fixtures/ (repeatable)")
    parser.add_argument("--rule", action="append", default=[],
                        help="only the fixtures checking this rule id, or ids starting "
                             "with a prefix ending in '.' (repeatable)")
    parser.add_argument("--kernel-only", action="store_true",
                        help="play only the kernel fixtures, even with an adapter that "
                             "offers a framework (the others are one SKIP line)")
    parser.add_argument("--timeout", type=_seconds, default=60.0,
                        help="seconds a fixture may take before it is a TIMEOUT (60)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only FAIL, TIMEOUT and ERROR lines and the summary")
    parser.add_argument("fixtures", nargs="*", type=Path,
                        help="fixture files or folders (paths, or relative to fixtures/)")
    return parser


def _seconds(text: str) -> float:
    """A `--timeout`: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < 10**9:  # NaN and infinity fail too
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0 and "
                                         f"finite (a fixture that hangs must end)")
    return value


def main(argv: Iterable[str] | None = None, prog: str = "hookline_conformance") -> int:
    """Run the command line ``argv``; ``prog`` is how the usage line names the command."""
    args = _parser(prog).parse_args(list(argv) if argv is not None else None)
    try:
        paths = find_fixtures(args.fixtures, args.area, args.rule)
        expected = load_expected(args.expected)
        adapter = (load_adapter(args.adapter) if args.adapter_command is None
                   else load_command_adapter(args.adapter_command, args.timeout))
        check_backend(args.backend)
        if args.kernel_only:
            adapter = KernelOnly(adapter)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        if args.junit_xml is not None:
            write_junit([], args.junit_xml, "adapter", error=str(error))
        if args.json is not None:
            write_json(args.json, args.adapter_command or args.adapter, args.backend,
                       dict.fromkeys(COUNT_KINDS, 0), [], error=str(error))
        return 2
    outcomes = [play(path, adapter, args.backend, expected, args.timeout) for path in paths]
    getattr(adapter, "close", lambda: None)()  # a child process, for --adapter-command
    unknown = sorted(set(expected) - {o.fixture for o in outcomes})
    kernel_only = [o for o in outcomes if o.outcome == "skip" and o.message == runner.KERNEL_ONLY]
    for outcome in outcomes:
        rules = f" [{', '.join(outcome.named_rules)}]"
        if outcome.outcome in ("fail", "timeout", "error"):
            print(f"{outcome.outcome.upper()} {outcome.fixture}{rules}: {outcome.message}")
        elif not args.quiet and outcome.outcome == "skip" and outcome not in kernel_only:
            print(f"SKIP {outcome.fixture}: {outcome.message}")
        elif not args.quiet and outcome.outcome == "xfail":
            print(f"XFAIL {outcome.fixture}{rules}: {outcome.why}")
    if kernel_only and not args.quiet:
        print(f"SKIP {len(kernel_only)} framework fixtures: {runner.KERNEL_ONLY}")
    counts = {kind: sum(o.outcome == kind for o in outcomes) for kind in COUNT_KINDS}
    if not (args.fixtures or args.area or args.rule):  # a partial run cannot tell a stale
        for name in unknown:                            # entry from an unplayed one
            print(f"FAIL {name}: listed in the expected-failures file, but no such fixture")
        counts["fail"] += len(unknown)
    adapter_name = str(getattr(adapter, "name", args.adapter))
    others = "".join(f", {counts[kind]} {kind}{'' if counts[kind] == 1 else 's'}"
                     for kind in ("timeout", "error") if counts[kind])
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped, "
          f"{counts['xfail']} failed as expected{others} (suite {SUITE_VERSION}, adapter "
          f"{adapter_name}, {args.backend})")
    if args.junit_xml is not None:
        write_junit(outcomes, args.junit_xml, adapter_name)
    if args.json is not None:
        write_json(args.json, adapter_name, args.backend, counts, outcomes)
    if args.write_expected is not None:
        written = write_expected(args.write_expected, outcomes, expected)
        print(f"wrote {written} expected failures to {args.write_expected}")
    if counts["error"]:
        return 2
    if not (counts["pass"] or counts["fail"] or counts["xfail"] or counts["timeout"]):
        print("error: nothing ran: every fixture selected was skipped; select others (--area, "
              "--rule), or use an adapter that runs them", file=sys.stderr)
        return 2  # a green CI job that checked nothing must not pass for one
    return 1 if counts["fail"] or counts["timeout"] else 0


def console() -> int:
    """The ``hookline-conformance`` console script."""
    return main(prog="hookline-conformance")
