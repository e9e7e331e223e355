"""The conformance suite's command line: which fixtures, the outcome of each, the reports.

Every fixture ends with one outcome:

- ``PASS``;
- ``SKIP`` with the reason: it ``requires`` something the adapter does not ``support``,
  or it is a framework fixture and the adapter offers only the kernel protocol;
- ``XFAIL`` (failed as expected): the adapter's expected-failures file lists it, and
  its failure message contains every fragment the entry gives;
- ``FAIL`` with the fixture's rule ids: anything else, including an expected failure
  that passed or failed for another reason.

The exit status is 0 when nothing is ``FAIL``, 1 otherwise, 2 for a usage error (no
fixture found, a missing path, an unreadable expected-failures file, an adapter of a
newer protocol, ``--backend trio`` without trio). Python warnings raised while fixtures
run are recorded, never printed.

    python spec/runner.py --adapter my_adapter:make --expected my_expected.toml \\
        --junit-xml suite.xml --json suite.json
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tomllib
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import runner

SUITE_VERSION = "0.1.0"
"""The suite's release: fixtures, rules and runner move together (hookline's version)."""

ADAPTER_PROTOCOL = 1
"""The adapter protocol this runner speaks (``runner.Adapter``; spec/README.md). An
adapter may say which one it was written for with a ``protocol`` attribute."""


class UsageError(Exception):
    """A problem with the command line or its files: exit status 2."""


@dataclass
class Outcome:
    fixture: str
    rules: list[str]
    outcome: str
    """``pass``, ``skip``, ``xfail`` or ``fail``."""
    message: str = ""
    why: str = ""
    warnings: list[str] = field(default_factory=list)


def find_fixtures(paths: list[Path]) -> list[Path]:
    """The fixture files named, folders searched recursively; every fixture by default."""
    if not paths:
        paths = [runner.FIXTURE_DIR]
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += runner.fixture_paths(path)
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"no such fixture file or folder: {path}")
    if not found:
        raise UsageError(f"no fixture (*.toml) found in {', '.join(map(str, paths))}")
    return found


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
    return dict(entries)


def load_adapter(spec: str) -> runner.Adapter:
    try:
        adapter = runner._load_adapter(spec)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load the adapter {spec!r}: {exc}") from None
    protocol = getattr(adapter, "protocol", ADAPTER_PROTOCOL)
    if protocol > ADAPTER_PROTOCOL:
        raise UsageError(f"the adapter {spec!r} speaks protocol {protocol}; this runner "
                         f"({SUITE_VERSION}) speaks {ADAPTER_PROTOCOL}: upgrade the suite")
    return adapter


def check_backend(backend: str) -> None:
    """The event loop library a backend other than asyncio needs, imported up front, so
    that its absence is a usage error rather than a traceback from the first fixture."""
    if backend == "asyncio":
        return
    try:
        import anyio  # noqa: F401
        import trio  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"--backend {backend} needs anyio and trio "
                         f"(pip install 'anyio[trio]'): {exc}") from None


def _name(path: Path) -> str:
    resolved = path.resolve()
    if resolved.is_relative_to(runner.FIXTURE_DIR):
        return resolved.relative_to(runner.FIXTURE_DIR).as_posix()
    return str(path)


def play(path: Path, adapter: runner.Adapter, backend: str,
         expected: dict[str, dict[str, Any]]) -> Outcome:
    """Run one fixture and classify it."""
    name = _name(path)
    try:
        rules = runner.fixture_rules(path)
    except tomllib.TOMLDecodeError:
        rules = []
    entry = expected.get(name)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            skipped = runner.run_sync(path, adapter, backend)
        except runner.FixtureFailure as failure:
            message = str(failure)
            fragments = entry["fails_with"] if entry else None
            if fragments is not None and all(f in message for f in fragments):
                outcome = Outcome(name, rules, "xfail", message, entry["why"] if entry else "")
            else:
                outcome = Outcome(name, rules, "fail", message)
        else:
            if skipped is not None:
                outcome = Outcome(name, rules, "skip", skipped)
            elif entry is not None:
                outcome = Outcome(name, rules, "fail",
                                  f"passed, but the expected-failures file says it fails "
                                  f"({entry['why']})")
            else:
                outcome = Outcome(name, rules, "pass")
        if outcome.outcome in ("fail", "xfail"):
            # A failed fixture's objects (a coroutine the kernel left unclosed, ...) are
            # held in cycles by its failure: collected here, their warnings are this
            # fixture's, not stray lines at exit. A passing fixture leaves none.
            gc.collect()
    outcome.warnings = [f"{w.category.__name__}: {w.message}" for w in seen]
    return outcome


def write_junit(outcomes: list[Outcome], path: Path, adapter_name: str) -> None:
    suite = ElementTree.Element("testsuite", {
        "name": f"hookline-conformance-{SUITE_VERSION}",
        "tests": str(len(outcomes)),
        "failures": str(sum(o.outcome == "fail" for o in outcomes)),
        "skipped": str(sum(o.outcome in ("skip", "xfail") for o in outcomes)),
    })
    for outcome in outcomes:
        case = ElementTree.SubElement(suite, "testcase", {
            "classname": f"conformance.{adapter_name}", "name": outcome.fixture})
        if outcome.outcome == "fail":
            failure = ElementTree.SubElement(case, "failure", {
                "message": f"[{', '.join(outcome.rules)}] {outcome.message.splitlines()[0]}"})
            failure.text = outcome.message
        elif outcome.outcome == "skip":
            ElementTree.SubElement(case, "skipped", {"message": outcome.message})
        elif outcome.outcome == "xfail":
            ElementTree.SubElement(case, "skipped", {
                "message": f"failed as expected: {outcome.why}", "type": "xfail"})
    ElementTree.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Play the conformance fixtures against a kernel.")
    parser.add_argument("--adapter", default="hookline_adapter:HooklineAdapter",
                        help="module:factory returning the adapter")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--expected", type=Path, default=None,
                        help="the adapter's expected-failures file (TOML)")
    parser.add_argument("--junit-xml", type=Path, default=None, help="write a JUnit report")
    parser.add_argument("--json", type=Path, default=None, help="write a JSON report")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only FAIL lines and the summary")
    parser.add_argument("fixtures", nargs="*", type=Path, help="fixture files or folders")
    return parser


def main(argv: Iterable[str] | None = None, prog: str = "runner.py") -> int:
    """Run the command line ``argv``; ``prog`` is how the usage line names the command."""
    args = _parser(prog).parse_args(list(argv) if argv is not None else None)
    try:
        paths = find_fixtures(args.fixtures)
        expected = load_expected(args.expected)
        adapter = load_adapter(args.adapter)
        check_backend(args.backend)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    outcomes = [play(path, adapter, args.backend, expected) for path in paths]
    unknown = sorted(set(expected) - {o.fixture for o in outcomes})
    for outcome in outcomes:
        rules = f" [{', '.join(outcome.rules)}]"
        if outcome.outcome == "fail":
            print(f"FAIL {outcome.fixture}{rules}: {outcome.message}")
        elif not args.quiet and outcome.outcome == "skip":
            print(f"SKIP {outcome.fixture}: {outcome.message}")
        elif not args.quiet and outcome.outcome == "xfail":
            print(f"XFAIL {outcome.fixture}{rules}: {outcome.why}")
    counts = {kind: sum(o.outcome == kind for o in outcomes)
              for kind in ("pass", "fail", "skip", "xfail")}
    if not args.fixtures:  # a partial run cannot tell a stale entry from an unplayed one
        for name in unknown:
            print(f"FAIL {name}: listed in the expected-failures file, but no such fixture")
        counts["fail"] += len(unknown)
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped, "
          f"{counts['xfail']} failed as expected (suite {SUITE_VERSION}, adapter "
          f"{getattr(adapter, 'name', args.adapter)}, {args.backend})")
    if args.junit_xml is not None:
        write_junit(outcomes, args.junit_xml, str(getattr(adapter, "name", "adapter")))
    if args.json is not None:
        args.json.write_text(json.dumps({
            "suite": SUITE_VERSION, "adapter_protocol": ADAPTER_PROTOCOL,
            "adapter": getattr(adapter, "name", args.adapter), "backend": args.backend,
            "counts": counts, "fixtures": [asdict(o) for o in outcomes],
        }, indent=2) + "\n", encoding="utf-8")
    return 1 if counts["fail"] else 0
