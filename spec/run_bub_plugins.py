"""Run the real Bub plugin ecosystem, unchanged, through hookline's Bub compatibility layer.

Needs Python 3.12+ (Bub 0.6.0a3 does); ``--install`` first pip-installs Bub, the real
plugins from the index (the versions in ``PLUGINS``) and this repository into the running
interpreter's environment. Standard library otherwise. Every check runs in a subprocess
of its own, with a fresh home folder (``HOME``, so Bub's ``~/.bub``, and
``HOOKLINE_HOME``), and the model is hookline's scripted model
(``HOOKLINE_MODEL=scripted:<file>``), so nothing leaves the machine. The checks, and what
each proves, are in ``bub_plugin_checks.py``.

    python -m spec.run_bub_plugins [--install] [-q] [CHECK ...]

Exit status 0 only when every check passed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .bub_plugin_checks import CHECK_FUNCTIONS

SPEC_DIR = Path(__file__).resolve().parent

ROOT = SPEC_DIR.parent
BUB = ("bub[app]==0.6.0a3", "pluggy==1.6.0")
PLUGINS = (
    "bub-schedule==0.1.1", "bub-web-search==0.1.1", "bub-mcp==0.3.1",
    "bub-mcp-server==0.0.2", "bub-discord==0.0.2", "bub-feishu==0.0.2", "bub-qq==0.1.0",
    "bub-wecom==0.1.2", "bub-lark==0.1.3",
)
EXTRA = ("apscheduler>=3.11.2,<4", "mcp")
"""bub-schedule needs APScheduler 3 (4 is a different API); mcp runs the test server."""
CHECKS = tuple(CHECK_FUNCTIONS)


def _install() -> None:
    """pip install Bub, the plugins and hookline; pip's output only when it fails."""
    wanted = [*BUB, *PLUGINS, *EXTRA, "-e", str(ROOT)]
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", *wanted],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"run_bub_plugins: pip install failed (status {done.returncode})")


def _missing() -> list[str]:
    from importlib import metadata

    missing = []
    for requirement in (*BUB, *PLUGINS):
        name, _, version = requirement.partition("==")
        name = name.partition("[")[0]
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have != version:
            missing.append(f"{name} {have or '(not installed)'} instead of {version}")
    try:
        metadata.version("hookline")
    except metadata.PackageNotFoundError:
        missing.append("hookline (not installed)")
    return missing


def _run_check(name: str, timeout: float) -> tuple[bool, str]:
    """One check in a subprocess with a fresh home; (passed, what it said)."""
    home = Path(tempfile.mkdtemp(prefix=f"bub-plugins-{name}-"))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("HOOKLINE_", "BUB_"))}
    env.update(HOME=str(home), HOOKLINE_HOME=str(home / "hookline"), PYTHONUNBUFFERED="1")
    # This module as a module of its package (its imports are relative), found from the
    # check's own folder through the folder that holds the package.
    top = sys.modules[__spec__.name.split(".")[0]]
    holder = str(Path(top.__file__ or "").resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [holder, env.get("PYTHONPATH")]))
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", __spec__.name, "--check", name], env=env,
                              cwd=home, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        return False, f"timed out after {timeout:g} s\n{exc.stdout or ''}{exc.stderr or ''}"
    finally:
        shutil.rmtree(home, ignore_errors=True)
    elapsed = time.monotonic() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith("ok ")]
    if done.returncode == 0:
        return True, f"{elapsed:.1f} s; " + "; ".join(line[3:] for line in lines)
    return False, f"status {done.returncode}\n{done.stdout}\n{done.stderr}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--install", action="store_true", help="pip install everything first")
    parser.add_argument("-q", "--quiet", action="store_true", help="only failures and a summary")
    parser.add_argument("--check", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per check")
    parser.add_argument("--jobs", type=int, default=1,
                        help="checks run at once (each has a home of its own)")
    parser.add_argument("checks", nargs="*", metavar="CHECK", help=", ".join(CHECKS))
    args = parser.parse_args(argv)
    unknown = [name for name in args.checks if name not in CHECKS]
    if unknown:
        parser.error(f"unknown check {', '.join(unknown)} (choose from {', '.join(CHECKS)})")
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    if args.check:
        return _check_main(args.check)
    if sys.version_info < (3, 12):
        print(f"run_bub_plugins: Bub 0.6.0a3 needs Python 3.12+, this is "
              f"{platform.python_version()}", file=sys.stderr)
        return 2
    if args.install:
        _install()
    missing = _missing()
    if missing:
        print(f"run_bub_plugins: {', '.join(missing)} (run with --install)", file=sys.stderr)
        return 2
    failed = 0
    chosen = args.checks or list(CHECKS)
    with ThreadPoolExecutor(args.jobs) as pool:  # each check is a process of its own
        results = list(pool.map(lambda name: _run_check(name, args.timeout), chosen))
    for name, (passed, detail) in zip(chosen, results, strict=True):
        failed += not passed
        if not passed:
            print(f"FAIL {name}: {detail}")
        elif not args.quiet:
            print(f"ok   {name}: {detail}")
    print(f"Bub plugins through hookline (bub 0.6.0a3, {len(PLUGINS)} real plugins, Python "
          f"{platform.python_version()}): {len(chosen) - failed} checks passed, {failed} failed")
    return 1 if failed else 0


def _check_main(name: str) -> int:
    """One check in this process (the driver's subprocess): status 1 and the traceback
    when it fails."""
    try:
        CHECK_FUNCTIONS[name]()
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
