"""The conformance runner as another kernel's CI uses it (spec/suite.py): plain pluggy
through spec/pluggy_adapter.py, in a process where hookline cannot be imported, with its
expected-failures file; outcomes, rule ids, JUnit and JSON reports, exit statuses."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from xml.etree import ElementTree

import pytest
from spec_support import SPEC_DIR

FIXTURES = len(list((SPEC_DIR / "fixtures").rglob("*.toml")))
DISPATCH = len(list((SPEC_DIR / "fixtures" / "dispatch").glob("*.toml")))
EXPECTED = SPEC_DIR / "pluggy_expected.toml"


def run_suite(*args: str | Path, cwd: Path, blocked: tuple[str, ...] = (),
              pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The runner in a fresh process where hookline, and ``blocked``, cannot be imported
    (``pythonpath``: a folder of the test's own adapters)."""
    path = [str(SPEC_DIR.parent), *([str(pythonpath)] if pythonpath else [])]
    code = (f"import sys; sys.modules.update(dict.fromkeys({('hookline', *blocked)!r}))\n"
            f"sys.path[:0] = {path!r}\n"
            "from spec.suite import main; raise SystemExit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)


def test_pluggy_passes_with_its_expected_failures_and_writes_reports(tmp_path: Path) -> None:
    out = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--expected", EXPECTED,
                    "--junit-xml", tmp_path / "suite.xml", "--json", tmp_path / "suite.json",
                    cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr == "", "no raw warnings, no traceback"
    lines = out.stdout.splitlines()
    xfails = [line for line in lines if line.startswith("XFAIL ")]
    skips = [line for line in lines if line.startswith("SKIP ")]
    assert len(xfails) == 11 and not [line for line in lines if line.startswith("FAIL ")]
    assert all(" reference.difference." in line or "[reference.difference." in line
               for line in xfails)
    assert skips == [f"SKIP {FIXTURES - DISPATCH} framework fixtures: a framework fixture, "
                     f"and the adapter has no new_framework() (kernel only)"]
    assert lines[-1] == (f"{DISPATCH - 11} passed, 0 failed, {FIXTURES - DISPATCH} skipped, 11 "
                         f"failed as expected (suite 0.1.0, adapter pluggy, asyncio)")
    suite = ElementTree.parse(tmp_path / "suite.xml").getroot()
    assert suite.get("tests") == str(FIXTURES) and suite.get("failures") == "0"
    assert len(suite.findall("testcase/skipped[@type='xfail']")) == 11
    report = json.loads((tmp_path / "suite.json").read_text())
    assert report["counts"] == {"pass": DISPATCH - 11, "fail": 0, "skip": FIXTURES - DISPATCH,
                                "xfail": 11, "timeout": 0, "error": 0}
    assert report["adapter_protocol"] == 1 and report["suite"] == "0.1.0"


def test_without_the_file_failures_name_their_rules(tmp_path: Path) -> None:
    out = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "-q",
                    SPEC_DIR / "fixtures" / "dispatch", cwd=tmp_path)
    assert out.returncode == 1
    assert ("FAIL dispatch/args-kwonly-required-passed.toml "
            "[reference.difference.kwonly-passed]: args-kwonly-required-passed.toml step 1 "
            "(call_many load_state): unexpected TypeError") in out.stdout
    assert out.stdout.splitlines()[-1].startswith(f"{DISPATCH - 11} passed, 11 failed, 0 skipped")


DROPS_NONE_ADAPTER = '''
from spec.pluggy_adapter import PluggyAdapter, PluggyKernel


class DropsNoneKernel(PluggyKernel):
    """call_many_sync without the None results: breaks dispatch.many.all-values only."""

    def dispatch(self, call, hook, kwargs):
        result = super().dispatch(call, hook, kwargs)
        if call == "call_many_sync":
            return [value for value in result if value is not None]
        return result


class DropsNoneAdapter(PluggyAdapter):
    name = "drops-none"

    def new_kernel(self):
        return DropsNoneKernel(super().new_kernel().pm)
'''


def test_a_failure_names_the_rule_of_the_check_that_failed(tmp_path: Path) -> None:
    """order-markers is named after the ordering rules; a kernel that orders right but
    drops None results fails its check of dispatch.many.all-values, and every report
    says so (the JSON keeps the fixture's rules beside it)."""
    (tmp_path / "drops_none.py").write_text(DROPS_NONE_ADAPTER)
    out = run_suite("--adapter", "drops_none:DropsNoneAdapter", "--json", tmp_path / "r.json",
                    "--junit-xml", tmp_path / "r.xml", "dispatch/order-markers.toml",
                    cwd=tmp_path, pythonpath=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.startswith(
        "FAIL dispatch/order-markers.toml [dispatch.many.all-values]: order-markers.toml "
        "step 2 (call_many_sync resolve_session): result:"), out.stdout
    (entry,) = json.loads((tmp_path / "r.json").read_text())["fixtures"]
    assert entry["failed_rule"] == "dispatch.many.all-values"
    assert entry["rules"] == tomllib.loads(
        (SPEC_DIR / "fixtures" / "dispatch" / "order-markers.toml").read_text())["rules"]
    case = ElementTree.parse(tmp_path / "r.xml").getroot().find("testcase/failure")
    assert case is not None
    assert case.get("message", "").startswith("[dispatch.many.all-values] order-markers.toml")


def test_an_expected_failure_that_passes_fails(tmp_path: Path) -> None:
    expected = tmp_path / "expected.toml"
    expected.write_text('[fixtures."dispatch/order-markers.toml"]\n'
                        'fails_with = ["x"]\nwhy = "believed broken"\n')
    out = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--expected", expected,
                    SPEC_DIR / "fixtures" / "dispatch" / "order-markers.toml", cwd=tmp_path)
    assert out.returncode == 1
    assert ("FAIL dispatch/order-markers.toml [dispatch.order.markers, "
            "report.stored-order, dispatch.many.all-values]: passed, but the "
            "expected-failures file says it fails (believed broken)") in out.stdout


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    missing = run_suite(tmp_path / "nowhere", cwd=tmp_path)
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr == f"error: no such fixture file or folder: {tmp_path / 'nowhere'}\n"
    (tmp_path / "empty").mkdir()
    empty = run_suite(tmp_path / "empty", cwd=tmp_path)
    assert empty.returncode == 2
    assert empty.stderr == f"error: no fixture (*.toml) found for {tmp_path / 'empty'}\n"
    broken = tmp_path / "broken.toml"
    broken.write_text("[fixtures.x\n")
    bad = run_suite("--expected", broken, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith(
        f"error: cannot read the expected-failures file {broken}:")
    adapter = run_suite("--adapter", "no_such_module:make", cwd=tmp_path)
    assert adapter.returncode == 2
    assert adapter.stderr.startswith("error: cannot load the adapter 'no_such_module:make'")


@pytest.mark.slow
def test_the_ci_walkthrough_of_the_conformance_page_runs(tmp_path: Path) -> None:
    """docs/conformance.md's commands for another kernel's CI, as written (in a venv of
    this test's own), in under ten commands."""
    page = (SPEC_DIR.parent / "docs" / "conformance.md").read_text(encoding="utf-8")
    section = page[page.index("## Another kernel's CI, step by step"):]
    block = section[section.index("```sh\n") + 6:section.index("\n```", section.index("```sh"))]
    commands = [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    assert 0 < len(commands) < 10
    script = block.replace("/tmp/suite-venv", str(tmp_path / "venv")).replace(
        "/tmp/suite.", str(tmp_path / "suite."))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=SPEC_DIR.parent,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = (f"{DISPATCH - 11} passed, 0 failed, {FIXTURES - DISPATCH} skipped, 11 failed as "
               f"expected (suite 0.1.0, adapter pluggy, asyncio)")
    assert summary in done.stdout
    assert f"`{summary}`" in page, "the page's figures are the run's"
    assert f"suite's {FIXTURES} fixtures" in page
    assert "error: no such fixture file or folder: spec/no-such-folder" in done.stderr
    assert ElementTree.parse(tmp_path / "suite.xml").getroot().get("failures") == "0"



def test_trio_without_trio_is_a_usage_error(tmp_path: Path) -> None:
    """``--backend trio`` where trio cannot be imported: one line and status 2, before any
    fixture runs, rather than the event loop library's traceback."""
    out = run_suite("--backend", "trio", "--adapter", "spec.pluggy_adapter:PluggyAdapter",
                    SPEC_DIR / "fixtures" / "dispatch", cwd=tmp_path, blocked=("trio",))
    assert (out.returncode, out.stdout) == (2, ""), out.stderr
    assert out.stderr.startswith("error: --backend trio needs anyio and trio (pip install "
                                 "'hookline-conformance[trio]', or './spec[trio]' from a "
                                 "checkout): ")
    assert len(out.stderr.splitlines()) == 1


def test_usage_mistakes_are_one_line_that_says_what_is_valid(tmp_path: Path) -> None:
    """A CI line with a typo: status 2 and one line naming the fix, the reports written,
    never a traceback that reads as a conformance failure (status 1)."""
    report = tmp_path / "r.json"
    quote = run_suite("--adapter-command", "python3 'host.py", "--json", report,
                      cwd=tmp_path)
    assert (quote.returncode, quote.stdout) == (2, "")
    assert quote.stderr.startswith("error: the adapter command \"python3 'host.py\" cannot "
                                   "be split into words: No closing quotation")
    assert json.loads(report.read_text())["counts"] == dict.fromkeys(
        ("pass", "fail", "skip", "xfail", "timeout", "error"), 0)
    for bad in ("inf", "nan", "0", "-1"):
        timeout = run_suite("--timeout", bad, cwd=tmp_path)
        assert timeout.returncode == 2 and "give a number of seconds above 0" in timeout.stderr
    area = run_suite("--area", "registration", cwd=tmp_path)
    assert area.returncode == 2 and area.stderr.strip() == (
        "error: no fixture (*.toml) found for --area registration: areas are dispatch, "
        "interception, prompt, resources, turn")
    rule = run_suite("--rule", "dispatch.order", cwd=tmp_path)
    assert "a prefix ending in '.' (dispatch.order.)" in rule.stderr


def test_a_kernel_that_logs_an_empty_warning_is_not_blamed_for_the_capture() -> None:
    """The suite reads each warning's first line; an empty one has none, and the kernel's
    own `log.warning("")` must not raise the suite's IndexError into the kernel."""
    import logging

    from hookline.spec import runner

    capture = runner._Capture()
    capture.emit(logging.LogRecord("k", logging.WARNING, "k.py", 1, "", None, None))
    assert capture.messages == [""]


def test_write_expected_keeps_the_entries_of_fixtures_not_played(tmp_path: Path) -> None:
    """Rewriting the file after a `--rule` run must not drop the other entries' reasons."""
    written = tmp_path / "mine.toml"
    written.write_text(EXPECTED.read_text())
    shipped = tomllib.loads(EXPECTED.read_text())["fixtures"]
    out = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--expected", written,
                    "--write-expected", written, "--rule", "dispatch.many.all-values", "-q",
                    cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert tomllib.loads(written.read_text())["fixtures"] == shipped


LEAKY_ADAPTER = '''
import inspect

from spec.pluggy_adapter import PluggyAdapter, PluggyKernel


class LeakyKernel(PluggyKernel):
    """As the reference does on a sync path: a coroutine it skips is never closed."""

    def dispatch(self, call, hook, kwargs):
        if not call.startswith("call_") or not call.endswith("_sync"):
            return super().dispatch(call, hook, kwargs)
        results = []
        for impl in self._impls(hook)[::-1]:
            value = impl.function(**{n: kwargs[n] for n in impl.argnames if n in kwargs})
            if inspect.isawaitable(value):
                continue
            if call == "call_first_sync" and value is not None:
                return value
            results.append(value)
        return None if call == "call_first_sync" else results


class LeakyAdapter(PluggyAdapter):
    name = "leaky"

    def new_kernel(self):
        return LeakyKernel(super().new_kernel().pm)
'''


def test_a_coroutine_the_kernel_leaves_unclosed_is_recorded_not_printed(tmp_path: Path) -> None:
    """A kernel that never closes a skipped coroutine fails the fixture; the coroutine,
    still held by the failed fixture, is collected while that fixture's warnings are
    recorded, so Python's warning lands in the JSON report, not on stderr at exit."""
    (tmp_path / "leaky_adapter.py").write_text(LEAKY_ADAPTER)
    fixture = SPEC_DIR / "fixtures" / "dispatch" / "sync-skips-awaitable.toml"
    out = run_suite("--adapter", "leaky_adapter:LeakyAdapter", "--json", tmp_path / "r.json",
                    fixture, cwd=tmp_path, pythonpath=tmp_path)
    assert out.returncode == 1
    assert out.stdout.startswith("FAIL dispatch/sync-skips-awaitable.toml")
    assert out.stderr == ""
    (recorded,) = json.loads((tmp_path / "r.json").read_text())["fixtures"]
    assert any("was never awaited" in warning for warning in recorded["warnings"])


BUGGY_ADAPTER = '''
from spec.pluggy_adapter import PluggyAdapter, PluggyKernel


class BuggyKernel(PluggyKernel):
    def dispatch(self, call, hook, kwargs):
        raise KeyError("adapter bug")


class BuggyAdapter(PluggyAdapter):
    name = "buggy"

    def new_kernel(self):
        return BuggyKernel(super().new_kernel().pm)
'''


def test_an_unexpected_error_says_where_it_was_raised(tmp_path: Path) -> None:
    """A kernel's (or adapter's) crash in a step names its file, line and function, on a
    line of its own: the first line, which --write-expected keeps, stays as it was."""
    (tmp_path / "buggy_adapter.py").write_text(BUGGY_ADAPTER)
    written = tmp_path / "mine.toml"
    out = run_suite("--adapter", "buggy_adapter:BuggyAdapter", "dispatch/first-none.toml",
                    "--write-expected", written, cwd=tmp_path, pythonpath=tmp_path)
    assert out.returncode == 1
    first, second = out.stdout.splitlines()[:2]
    assert first.endswith("unexpected KeyError: 'adapter bug'")
    assert second == "  raised at buggy_adapter.py:7, dispatch"
    (entry,) = tomllib.loads(written.read_text())["fixtures"].values()
    assert entry["fails_with"] == [first.split(": ", 1)[1]]


def test_the_installed_command_names_itself_in_its_usage(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "hookline.spec", "--help"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m hookline.spec ")


def test_the_suite_is_versioned_with_hookline() -> None:
    """Suite N ships in hookline N: its reports name a release users can install."""
    from hookline.spec import suite

    pyproject = tomllib.loads((SPEC_DIR.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["version"] == suite.SUITE_VERSION


ADAPTERS = Path(__file__).parent / "conformance_adapters"


def test_an_adapter_named_like_a_module_of_the_suite_is_the_users(tmp_path: Path) -> None:
    """The user's own pluggy_adapter.py, named as the suite's shipped one: the suite's
    modules live in its package, so by module name and by path the user's is what runs."""
    own = tmp_path / "pluggy_adapter.py"
    own.write_text((ADAPTERS / "named_like_the_suites.py").read_text())
    by_name = run_suite("--adapter", "pluggy_adapter:make", "dispatch/order-markers.toml",
                        cwd=tmp_path)
    assert "adapter mine-not-the-suites" in by_name.stdout, by_name.stdout + by_name.stderr
    by_path = run_suite("--adapter", f"{own}:make", "dispatch/order-markers.toml",
                        "--json", tmp_path / "r.json", "--junit-xml", tmp_path / "r.xml",
                        cwd=tmp_path)
    assert by_path.returncode == 0, by_path.stdout + by_path.stderr
    assert "adapter mine-not-the-suites" in by_path.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["adapter"] == "mine-not-the-suites" and report["counts"]["pass"] == 1
    suite = ElementTree.parse(tmp_path / "r.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")


def test_an_adapter_must_say_which_protocol_it_speaks(tmp_path: Path) -> None:
    (tmp_path / "silent.py").write_text(
        "from spec.pluggy_adapter import PluggyAdapter\n\n\n"
        "class Silent(PluggyAdapter):\n    protocol = None\n")
    out = run_suite("--adapter", "silent:Silent", "--json", tmp_path / "r.json", cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == ("error: the adapter 'silent:Silent' does not say which adapter "
                          "protocol it speaks: give it a class attribute protocol = 1\n")
    assert "protocol" in json.loads((tmp_path / "r.json").read_text())["error"]


def test_harness_failures_are_errors_with_status_2_and_reports(tmp_path: Path) -> None:
    adapter = ADAPTERS / "faulty.py"
    out = run_suite("--adapter", f"{adapter}:crashing", "--junit-xml", tmp_path / "r.xml",
                    "--json", tmp_path / "r.json", "dispatch/order-markers.toml",
                    cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert ("ERROR dispatch/order-markers.toml [dispatch.order.markers, "
            "report.stored-order, dispatch.many.all-values]: the adapter raised "
            "RuntimeError: no kernel today (faulty.py:") in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["counts"]["error"] == 1
    case = ElementTree.parse(tmp_path / "r.xml").getroot().find("testcase/error")
    assert case is not None and case.get("type") == "ERROR"

    broken = run_suite("--adapter", f"{ADAPTERS / 'raises_on_import.py'}:make", "--json",
                       tmp_path / "i.json", "--junit-xml", tmp_path / "i.xml", cwd=tmp_path)
    assert broken.returncode == 2 and broken.stdout == ""
    assert "cannot load the adapter" in broken.stderr and "ValueError: broken at import" \
        in broken.stderr
    assert "broken at import" in json.loads((tmp_path / "i.json").read_text())["error"]
    assert ElementTree.parse(tmp_path / "i.xml").getroot().get("errors") == "1"


def test_a_hanging_fixture_is_a_timeout_and_the_suite_goes_on(tmp_path: Path) -> None:
    out = run_suite("--adapter", f"{ADAPTERS / 'faulty.py'}:hanging", "--timeout", "1",
                    "--json", tmp_path / "r.json", "--junit-xml", tmp_path / "r.xml",
                    "dispatch/order-markers.toml", "dispatch/order-registration.toml",
                    cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "TIMEOUT dispatch/order-markers.toml" in out.stdout
    assert "did not end within 1 s (--timeout)" in out.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["counts"]["timeout"], report["counts"]["pass"]) == (1, 1), report
    suite = ElementTree.parse(tmp_path / "r.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.get("type") == "TIMEOUT"


def test_fixtures_are_chosen_by_area_rule_and_name(tmp_path: Path) -> None:
    markers = sum("dispatch.order.markers" in tomllib.loads(path.read_text()).get("rules", [])
                  for path in (SPEC_DIR / "fixtures").rglob("*.toml"))
    by_rule = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--rule",
                        "dispatch.order.markers", cwd=tmp_path)
    assert markers > 1
    assert by_rule.stdout.splitlines()[-1].startswith(f"{markers} passed, 0 failed, 0 skipped")
    by_prefix = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--rule",
                          "dispatch.order.", "-q", cwd=tmp_path)
    assert by_prefix.returncode == 0 and " 0 failed" in by_prefix.stdout
    by_area = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--area", "dispatch",
                        "--expected", EXPECTED, "-q", cwd=tmp_path)
    assert by_area.stdout.splitlines()[-1].startswith(f"{DISPATCH - 11} passed, 0 failed, "
                                                      f"0 skipped, 11 failed as expected")
    nothing = run_suite("--rule", "no.such.rule", cwd=tmp_path)
    assert nothing.returncode == 2 and "--rule no.such.rule" in nothing.stderr


def test_write_expected_writes_what_fails_and_keeps_the_reasons(tmp_path: Path) -> None:
    written = tmp_path / "mine.toml"
    out = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--area", "dispatch",
                    "--expected", EXPECTED, "--write-expected", written, "-q", cwd=tmp_path)
    assert "wrote 11 expected failures to" in out.stdout
    entries = tomllib.loads(written.read_text())["fixtures"]
    shipped = tomllib.loads(EXPECTED.read_text())["fixtures"]
    assert set(entries) == set(shipped)
    assert all(entries[name]["why"] == shipped[name]["why"] for name in entries)
    # Still failing as the file says: its chosen fragments are kept, not the first line.
    assert all(entries[name]["fails_with"] == shipped[name]["fails_with"] for name in entries)
    again = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--area", "dispatch",
                      "--expected", written, "-q", cwd=tmp_path)
    assert again.returncode == 0, again.stdout
    assert again.stdout.splitlines()[-1].startswith(f"{DISPATCH - 11} passed, 0 failed, "
                                                    f"0 skipped, 11 failed as expected")


def test_a_failure_shows_a_diff_without_memory_addresses() -> None:
    from hookline.spec import runner

    shown = runner.shown_difference({"a": [object()] * 9, "b": 1}, {"a": [], "b": 2})
    assert " at 0x" not in shown and "--- expected" in shown and "+++ actual" in shown


def test_a_written_file_is_refused_until_each_reason_is_given(tmp_path: Path) -> None:
    written = tmp_path / "new.toml"
    run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--area", "dispatch",
              "--write-expected", written, "-q", cwd=tmp_path)
    assert 'why = "TODO: why this fails"' in written.read_text()
    out = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--area", "dispatch",
                    "--expected", written, cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert "still has the placeholder why 'TODO: why this fails'" in out.stderr


def test_kernel_only_plays_the_kernel_fixtures_of_a_framework_adapter(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "hookline.spec", "--kernel-only", "--json",
                          tmp_path / "r.json"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        f"SKIP {FIXTURES - DISPATCH} framework fixtures: a framework fixture, and the adapter "
        f"has no new_framework() (kernel only)",
        f"{DISPATCH} passed, 0 failed, {FIXTURES - DISPATCH} skipped, 0 failed as expected "
        f"(suite 0.1.0, adapter hookline, asyncio)"]
