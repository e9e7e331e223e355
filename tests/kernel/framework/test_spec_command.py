"""The conformance suite through ``--adapter-command`` (spec/command_adapter.py): a kernel
in another process, on another Python when there is one, speaking the JSON-lines protocol
of docs/conformance-command.md. The dispatch core, copied as the kernel isolation tests
copy it, runs behind conformance_adapters/kernel_host.py; the runner's checks bite
through the pipe, and a child that breaks the protocol is an error, never a hang."""

from __future__ import annotations

import functools
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from spec_support import DISPATCH_DIR, ROOT, SPEC_DIR

FIXTURES = len(list((SPEC_DIR / "fixtures").rglob("*.toml")))
DISPATCH = len(list((SPEC_DIR / "fixtures" / "dispatch").glob("*.toml")))
HOST = Path(__file__).parent / "conformance_adapters" / "kernel_host.py"


@functools.cache
def host_python() -> tuple[str, str]:
    """A Python 3.12 for the kernel host when there is one (the runner is on 3.11), else
    this one, in a process of its own: (executable, version)."""
    candidates = [*sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python"))),
                  shutil.which("python3.12")]
    for candidate in [*candidates, sys.executable]:
        if not candidate:
            continue
        found = subprocess.run([candidate, "-c", "import sys; print(*sys.version_info[:3], "
                                "sep='.')"], capture_output=True, text=True)
        version = found.stdout.strip()
        if found.returncode == 0 and (version.startswith("3.12.") or candidate == sys.executable):
            print(f"the kernel host runs on {candidate} (Python {version})")
            return candidate, version
    raise AssertionError("unreachable: sys.executable runs")


@pytest.fixture(scope="module")
def core_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where a copy of kernel/_dispatch is importable as ``acme_core``."""
    folder = tmp_path_factory.mktemp("core")
    shutil.copytree(DISPATCH_DIR, folder / "acme_core",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def command(*host_args: str) -> str:
    return shlex.join([host_python()[0], str(HOST), "--core", "acme_core", *host_args])


def run_suite(*args: str | Path, cwd: Path, core: Path) -> subprocess.CompletedProcess[str]:
    """The runner in a fresh process where hookline cannot be imported; the kernel host it
    starts finds the core copy and the suite package on PYTHONPATH."""
    code = (f"import sys; sys.modules['hookline'] = None; sys.path[:0] = [{str(ROOT)!r}]\n"
            "from spec.suite import main; raise SystemExit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(core), str(ROOT)])}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_selection_a_kernel_only_adapter_skips_whole_is_no_green_run(
        tmp_path: Path, core_path: Path) -> None:
    """`--area turn` holds only framework fixtures: nothing runs, and that is said."""
    out = run_suite("--adapter-command", command(), "--area", "turn", cwd=tmp_path,
                    core=core_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("error: nothing ran: every fixture selected was skipped")
    assert out.stdout.splitlines()[-1].startswith("0 passed, 0 failed, ")


def test_every_dispatch_fixture_passes_on_a_kernel_in_another_process(
        tmp_path: Path, core_path: Path) -> None:
    version = host_python()[1]
    out = run_suite("--adapter-command", command(), "--junit-xml", tmp_path / "suite.xml",
                    "--json", tmp_path / "suite.json", cwd=tmp_path, core=core_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr == ""
    name = f"dispatch-core on Python {version}"
    assert out.stdout.splitlines() == [
        f"SKIP {FIXTURES - DISPATCH} framework fixtures: a framework fixture, and the adapter "
        f"has no new_framework() (kernel only)",
        f"{DISPATCH} passed, 0 failed, {FIXTURES - DISPATCH} skipped, 0 failed as expected "
        f"(suite 0.1.0, adapter {name}, asyncio)"]
    suite = ElementTree.parse(tmp_path / "suite.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == (
        str(FIXTURES), "0", "0")
    assert {case.get("classname") for case in suite.iter("testcase")} == {
        f"conformance.{name}"}
    report = json.loads((tmp_path / "suite.json").read_text())
    assert report["adapter"] == name
    assert report["counts"] == {"pass": DISPATCH, "fail": 0, "skip": FIXTURES - DISPATCH,
                                "xfail": 0, "timeout": 0, "error": 0}


def test_the_dispatch_fixtures_pass_on_trio_too(tmp_path: Path, core_path: Path) -> None:
    out = run_suite("--adapter-command", command(), "--backend", "trio", "--area", "dispatch",
                    cwd=tmp_path, core=core_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines()[-1].startswith(f"{DISPATCH} passed, 0 failed, 0 skipped")


CONCEALING_HOST = """
import sys
sys.path.insert(0, {folder!r})
import kernel_host

handle = kernel_host.Host.handle


def concealing(self, request):
    '''The same kernel, but its replies hide the log records, say every awaitable was
    left pending and every exception is a copy.'''
    reply = handle(self, request)
    reply["logs"] = []
    for made in reply.get("awaitables", []):
        made["state"] = "pending"
    if "error" in reply:
        reply["error"]["from_implementation"] = False
    return reply


kernel_host.Host.handle = concealing
raise SystemExit(kernel_host.main())
"""


def test_the_runner_checks_what_the_replies_carry(tmp_path: Path, core_path: Path) -> None:
    """Logs, awaitables and exception identity come back over the pipe and are checked
    as for a kernel in process: a host that conceals them fails those fixtures."""
    host = tmp_path / "concealing_host.py"
    host.write_text(CONCEALING_HOST.format(folder=str(HOST.parent)))
    concealing = shlex.join([host_python()[0], str(host), "--core", "acme_core"])
    out = run_suite("--adapter-command", concealing, "dispatch/sync-skips-awaitable.toml",
                    "dispatch/many-all-values.toml", "dispatch/exceptions-sync.toml",
                    "dispatch/order-markers.toml", cwd=tmp_path, core=core_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert ("many-all-values.toml step 1 (call_many load_state): coroutines closed:\n"
            "  expected 'CLOSED'\n  actual   ['CORO_CREATED']") in out.stdout
    assert ("sync-skips-awaitable.toml step 1 (call_first_sync build_tape_context): "
            "warnings:\n  expected ['hook.async_not_supported hook=build_tape_context "
            "adapter=asyncy']\n  actual   []") in out.stdout
    assert ("exceptions-sync.toml step 1 (call_first_sync resolve_session): error is the "
            "very exception an implementation raised") in out.stdout
    assert out.stdout.splitlines()[-1].startswith("1 passed, 3 failed")


@pytest.mark.parametrize(("child", "why"), [
    ("import sys; sys.exit(3)", "exited with status 3 instead of answering 'hello'"),
    ("print('hello there')", "answered 'hello' with a line that is not JSON: 'hello there'"),
    ("import time; time.sleep(60)", "did not answer 'hello' within 1 s (--timeout)"),
    ("import sys, json; sys.stdin.readline(); print(json.dumps({'id': 1, 'protocol': 2}))",
     "speaks protocol 2; this runner speaks 1: upgrade the suite"),
], ids=["exits", "garbage", "hangs", "newer-protocol"])
def test_a_child_that_cannot_say_hello_is_a_usage_error(
        tmp_path: Path, core_path: Path, child: str, why: str) -> None:
    cmd = shlex.join([sys.executable, "-c", child])
    out = run_suite("--adapter-command", cmd, "--timeout", "1", "--json", tmp_path / "r.json",
                    "--junit-xml", tmp_path / "r.xml", cwd=tmp_path, core=core_path)
    assert (out.returncode, out.stdout) == (2, ""), out.stderr
    assert out.stderr == f"error: the adapter command `{cmd}` {why}\n"
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["adapter"], report["error"]) == (cmd, out.stderr[7:-1])
    assert ElementTree.parse(tmp_path / "r.xml").getroot().get("errors") == "1"


@pytest.mark.parametrize(("how", "why"), [
    ("exit", "exited with status 3 instead of answering 'dispatch'"),
    ("garbage", "answered 'dispatch' with a line that is not JSON: 'this is not JSON'"),
    ("hang", "did not answer 'dispatch' within "),
])
def test_a_child_that_breaks_mid_fixture_is_an_error_and_the_next_fixture_gets_a_new_one(
        tmp_path: Path, core_path: Path, how: str, why: str) -> None:
    cmd = command("--fail-on-hook", f"build_tape_context:{how}")
    out = run_suite("--adapter-command", cmd, "--timeout", "2", "--json", tmp_path / "r.json",
                    "--junit-xml", tmp_path / "r.xml", "dispatch/first-none.toml",
                    "dispatch/order-markers.toml", cwd=tmp_path, core=core_path)
    assert out.returncode == 2, out.stdout + out.stderr
    error, summary = out.stdout.splitlines()
    assert error.startswith("ERROR dispatch/first-none.toml [dispatch.first.none, "
                            "dispatch.async.awaited, dispatch.sync.skip-awaitable]: the "
                            "adapter raised CommandError: "
                            f"the adapter command `{cmd}` {why}")
    assert ("its stderr ended with: kernel_host: told to "
            f"{how} at the first dispatch of build_tape_context") in error
    assert summary.startswith("1 passed, 0 failed, 0 skipped, 0 failed as expected, 1 error")
    counts = json.loads((tmp_path / "r.json").read_text())["counts"]
    assert (counts["error"], counts["pass"], counts["timeout"]) == (1, 1, 0)
    case = ElementTree.parse(tmp_path / "r.xml").getroot().find("testcase/error")
    assert case is not None and case.get("type") == "ERROR"


def test_adapter_and_adapter_command_exclude_each_other(tmp_path: Path, core_path: Path) -> None:
    out = run_suite("--adapter", "spec.pluggy_adapter:PluggyAdapter", "--adapter-command",
                    command(), cwd=tmp_path, core=core_path)
    assert out.returncode == 2
    assert "argument --adapter-command: not allowed with argument --adapter" in out.stderr


def test_a_child_that_echoes_the_requests_is_refused_at_hello(
        tmp_path: Path, core_path: Path) -> None:
    """`cat` sends every request back: its hello "reply" names no kernel, so the runner
    stops there rather than playing 35 fixtures against an echo."""
    out = run_suite("--adapter-command", "cat", "--json", tmp_path / "r.json", cwd=tmp_path,
                    core=core_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr.startswith("error: the adapter command `cat` answered hello without "
                                 "its kernel's name (an echo of the request?)")
    assert "hello" in json.loads((tmp_path / "r.json").read_text())["error"]
