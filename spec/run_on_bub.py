"""Run the conformance suite on Bub 0.6.0a3, the reference, and classify every fixture.

Needs Python 3.12+ with ``bub[app]==0.6.0a3`` and ``pluggy==1.6.0`` (``--install`` puts
them into the running interpreter's environment first). Standard library otherwise.

Each fixture is played through ``bub_adapter.BubAdapter`` on asyncio (Bub's own loop) and
put in one class:

- ``passed``: a fixture of the reference's rules that Bub passes;
- ``failed as documented``: a fixture of a ``reference.difference.*`` rule that fails on
  Bub with the failure ``bub_expected.toml`` gives for it (the reason DIFFERENCES.md
  states), on a check filed under a ``reference.difference.*`` rule;
- ``not applicable``: every checking step asks for something Bub 0.6 does not have
  (``bub_adapter.NOT_APPLICABLE``);
- ``unexpected``: anything else: a reference fixture that fails, a difference fixture
  that passes or fails for another reason.

Steps whose action Bub lacks become empty ``check`` steps in a fixture that has others
(the rest still runs, step numbers stay, and a note says so). The runner's check that no
coroutine is left unawaited is itself the documented difference
``reference.difference.skipped-coroutine-closed``: Bub never closes a coroutine it skips
on a sync path. It is pinned by ``fixtures/dispatch/sync-skips-awaitable.toml``
(``coroutines_closed``); in every other fixture this driver reports those coroutines
instead of failing the step on them, so the fixture's own rules are still checked.

Exit status 0 only when nothing is unexpected and every documented difference that
applies fails as documented.

    python -m spec.run_on_bub [--install] [-v | -q] [FIXTURE ...]
"""

from __future__ import annotations

import argparse
import gc
import platform
import subprocess
import sys
import tempfile
import tomllib
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SPEC_DIR = Path(__file__).resolve().parent
EXPECTED_FILE = SPEC_DIR / "bub_expected.toml"
REQUIREMENTS = ("bub[app]==0.6.0a3", "pluggy==1.6.0")
DIFFERENCE = "reference.difference."
COROUTINE_RULE = "reference.difference.skipped-coroutine-closed"
NEVER_AWAITED = "never awaited"
STRUCTURAL = frozenset({"register", "unregister", "check"})
"""Steps that check nothing of their own unless they carry an expectation."""


@dataclass
class Outcome:
    fixture: str
    kind: str  # passed, documented, not-applicable, unexpected
    detail: str = ""
    notes: list[str] = field(default_factory=list)
    unawaited: int = 0


class _UnawaitedWarnings:
    """Stands in for the ``warnings`` module inside the runner while a fixture runs.

    The runner records a step's warnings with ``catch_warnings(record=True)`` and fails the
    step on any "coroutine ... was never awaited". This keeps those records out of the
    step's list (in ``seen``) and passes every other warning through unchanged.
    """

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(warnings, name)

    @contextmanager
    def catch_warnings(self, *args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings(*args, **kwargs) as records:
            try:
                yield records
            finally:
                if records is not None:
                    kept = [w for w in records if NEVER_AWAITED not in str(w.message)]
                    self.seen.extend(str(w.message) for w in records if w not in kept)
                    records[:] = kept


def _checks_something(step: dict[str, Any]) -> bool:
    return step["action"] not in STRUCTURAL or bool(step.get("expect"))


def _applicable_copy(path: Path, data: dict[str, Any], missing: dict[str, str],
                     workdir: Path) -> tuple[Path | None, list[str]]:
    """The fixture with an empty check in place of each step Bub cannot run (None if then
    nothing would be checked), and a note per action left out."""
    steps = list(data.get("steps", []))
    removed = [(n, s) for n, s in enumerate(steps, 1) if s["action"] in missing]
    if not removed:
        return path, []
    notes = []
    for action in dict.fromkeys(s["action"] for _, s in removed):
        numbers = ", ".join(str(n) for n, s in removed if s["action"] == action)
        notes.append(f"step(s) {numbers} ({action}) not applicable: {missing[action]}")
    # An empty check step in place of each removed one keeps the runner's step numbers.
    kept = [{"action": "check"} if s["action"] in missing else s for s in steps]
    if not any(_checks_something(s) for s in kept):
        return None, notes
    text = path.read_text(encoding="utf-8")
    # Rewrite only the steps: everything before the first [[steps]] is kept verbatim.
    head = text.split("\n[[steps]]", 1)[0]
    copy = workdir / path.relative_to(SPEC_DIR / "fixtures")
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(head + "\n" + "".join(_toml_step(s) for s in kept), encoding="utf-8")
    return copy, notes


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_value(k)} = {_toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_step(step: dict[str, Any]) -> str:
    return "\n[[steps]]\n" + "".join(f"{key} = {_toml_value(value)}\n"
                                     for key, value in step.items())


def _play(path: Path, adapter: Any) -> tuple[str | None, str | None, str | None]:
    """Run one fixture: (its failure, the rule of the failing check, why it is not
    applicable), None for each that is not.

    Only text leaves this function, so nothing keeps the fixture's objects alive after it.
    """
    from . import bub_adapter, runner

    try:
        runner.run_sync(path, adapter)
    except runner.FixtureFailure as exc:
        return str(exc), exc.rule, None
    except bub_adapter.NotApplicable as exc:
        return None, None, str(exc)
    return None, None, None


def classify(path: Path, adapter: Any, expected: dict[str, Any], workdir: Path) -> Outcome:
    from . import bub_adapter, runner

    name = path.relative_to(SPEC_DIR / "fixtures").as_posix()
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    differences = [r for r in data.get("rules", []) if r.startswith(DIFFERENCE)]
    playable, notes = _applicable_copy(path, data, bub_adapter.NOT_APPLICABLE, workdir)
    if playable is None:
        return Outcome(name, "not-applicable", "; ".join(notes))
    shim = _UnawaitedWarnings()
    runner.warnings = shim  # type: ignore[attr-defined]
    try:
        with shim.catch_warnings(record=True):
            warnings.simplefilter("always")
            failure, rule, not_applicable = _play(playable, adapter)
            gc.collect()  # the fixture's own coroutines are reported with it
    finally:
        runner.warnings = warnings  # type: ignore[attr-defined]
    if not_applicable is not None:
        return Outcome(name, "not-applicable", not_applicable, notes)
    unawaited = len(shim.seen) if COROUTINE_RULE not in differences else 0
    if unawaited:
        notes.append(f"Bub left {unawaited} skipped coroutine(s) unawaited "
                     f"({COROUTINE_RULE}; not counted against this fixture)")
    outcome = _judge(name, differences, failure, expected.get(name), notes, rule)
    outcome.unawaited = unawaited
    return outcome


def _judge(name: str, differences: list[str], failure: str | None, want: dict | None,
           notes: list[str], rule: str | None = None) -> Outcome:
    """The class of a fixture that ran, from its difference rules and its failure (and
    `rule`, the rule of the check that failed: a documented difference fails on a check
    of its own rule, not on one the reference is meant to pass)."""
    if not differences:
        if failure is None:
            return Outcome(name, "passed", notes=notes)
        return Outcome(name, "unexpected", f"fails on the reference: {failure}", notes)
    if failure is None:
        return Outcome(name, "unexpected",
                       f"checks {', '.join(differences)} but passes on the reference", notes)
    if want is None:
        return Outcome(name, "unexpected",
                       f"no entry in bub_expected.toml; it failed with: {failure}", notes)
    fragments = want["fails_with"]
    fragments = [fragments] if isinstance(fragments, str) else fragments
    missed = [f for f in fragments if f not in failure]
    if missed:
        return Outcome(name, "unexpected",
                       f"fails, but not as bub_expected.toml says (missing {missed}): {failure}",
                       notes)
    if rule is not None and not rule.startswith(DIFFERENCE):
        return Outcome(name, "unexpected",
                       f"fails as bub_expected.toml says, but on a check of {rule}, which the "
                       f"reference is meant to pass: {failure}", notes)
    return Outcome(name, "documented", f"{', '.join(differences)}: {want['why']}", notes)


def _install() -> None:
    """pip install the reference; pip's output is shown only when it fails."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", *REQUIREMENTS],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"run_on_bub: pip install {' '.join(REQUIREMENTS)} failed "
                         f"(status {done.returncode})")


def _versions() -> dict[str, str | None]:
    """The installed versions of what REQUIREMENTS pins (None when missing)."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for requirement in REQUIREMENTS:
        name = requirement.split("[")[0].split("==")[0]
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def _wrong_versions() -> list[str]:
    wanted = {r.split("[")[0].split("==")[0]: r.split("==")[1] for r in REQUIREMENTS}
    return [f"{name} {have or '(not installed)'} instead of {wanted[name]}"
            for name, have in _versions().items() if have != wanted[name]]


LABELS = {
    "passed": "passed",
    "documented": "failed as documented",
    "not-applicable": "not applicable",
    "unexpected": "unexpected",
}


def _print_table(outcomes: list[Outcome], kinds: tuple[str, ...]) -> None:
    for kind in kinds:
        chosen = [o for o in outcomes if o.kind == kind]
        if not chosen:
            continue
        print(f"== {LABELS[kind]} ({len(chosen)})")
        for outcome in chosen:
            print(f"{outcome.fixture}" + (f": {outcome.detail}" if outcome.detail else ""))
            for note in outcome.notes:
                print(f"    note: {note}")


def _stale_entries(expected: dict[str, Any], outcomes: list[Outcome]) -> list[Outcome]:
    """Entries of bub_expected.toml naming no fixture of a difference rule (when every
    fixture ran): an expectation nothing checks any more."""
    from . import runner

    fixtures = SPEC_DIR / "fixtures"
    differences = {p.relative_to(fixtures).as_posix() for p in runner.fixture_paths()
                   if any(r.startswith(DIFFERENCE) for r in runner.fixture_rules(p))}
    return [Outcome(name, "unexpected", "bub_expected.toml has an entry for it, but it is "
                    "not a fixture of a reference.difference.* rule")
            for name in sorted(set(expected) - differences)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true",
                        help=f"pip install {' '.join(REQUIREMENTS)} first")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also list the passing fixtures")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print only the unexpected fixtures and the summary line")
    parser.add_argument("fixtures", nargs="*", type=Path)
    args = parser.parse_args(argv)
    if sys.version_info < (3, 12):
        print("run_on_bub: Bub 0.6 needs Python 3.12 or newer", file=sys.stderr)
        return 2
    if args.install:
        _install()
    if wrong := _wrong_versions():
        print(f"run_on_bub: the reference is {' and '.join(REQUIREMENTS)}; found "
              f"{', '.join(wrong)} (run with --install)", file=sys.stderr)
        return 2
    from . import bub_adapter, runner

    expected = tomllib.loads(EXPECTED_FILE.read_text(encoding="utf-8"))["fixtures"]
    paths = [p.resolve() for p in args.fixtures] or runner.fixture_paths()
    adapter = bub_adapter.BubAdapter()
    # Bub's imports leave many long-lived objects; the runner collects garbage after every
    # step, so they are moved out of the collector's way once (as the runner itself does
    # when nothing is frozen yet).
    gc.collect()
    gc.freeze()
    with tempfile.TemporaryDirectory(prefix="spec-bub-") as workdir:
        outcomes = [classify(path, adapter, expected, Path(workdir)) for path in paths]
    if not args.fixtures:
        outcomes += _stale_entries(expected, outcomes)
    if args.quiet:
        _print_table(outcomes, ("unexpected",))
    else:
        _print_table(outcomes, ("documented", "not-applicable", "unexpected")
                     + (("passed",) if args.verbose else ()))
    counts = {kind: sum(o.kind == kind for o in outcomes) for kind in LABELS}
    leaky = [o for o in outcomes if o.unawaited]
    versions = ", ".join(f"{name} {have}" for name, have in _versions().items())
    print(f"conformance on the reference ({versions}, Python {platform.python_version()}): "
          + ", ".join(f"{counts[kind]} {LABELS[kind]}" for kind in LABELS)
          + f" of {len(paths)} fixtures"
          + (f"; {sum(o.unawaited for o in leaky)} skipped coroutine(s) left unawaited in "
             f"{len(leaky)} fixture(s) ({COROUTINE_RULE})" if leaky else ""))
    return 1 if counts["unexpected"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
