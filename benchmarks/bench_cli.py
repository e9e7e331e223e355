"""Start-up time of the ``hookline`` command line, against a bare interpreter and ``bub``.

Each measurement is the wall-clock time of one fresh process, from spawn to exit:

- ``python -c pass``: the bare interpreter, the floor every Python command pays;
- ``hookline --help`` and ``hookline --version``;
- ``hookline run hello``: one turn on the offline model, with ``HOOKLINE_HOME`` an empty
  temporary folder (a fresh home each run: no config, no tape) and a temporary workspace;
- ``bub --help``, when the Bub reference CLI is found (``--bub PATH``, else
  ``/work/venv-bub312/bin/bub``), the yardstick of the goal;
- when the MCP SDK is installed, ``hookline run hello`` side by side twice more, each run
  with a fresh copy of a home that has run once already: ``run hello (config)``, whose
  config file configures nothing, and ``run hello (MCP)``, whose config file configures one
  stdio MCP server that starts slowly (``mcp_slow_server.py``: it sleeps 1.5 s, then serves
  with the SDK) and whose home keeps that server's tool list from the first run. The model
  is offered the kept tools at once and never calls them, so the server's start should cost
  the turn nothing.

Bytecode is cached as in an installed package (a private ``PYTHONPYCACHEPREFIX`` folder,
written by one warm-up run per command), so compiling sources is not measured. Figures
are medians over several runs of each command, run interleaved so that machine noise hits
them alike; the MCP verdict also gives the ratio of CPU time (the processes' user and
system time), which a busy machine disturbs less. Not a test: the goal lines say PASS/MISS
without changing the exit status.

Goals: ``hookline --help`` and ``hookline run hello`` each take at most 0.25x
``bub --help`` on the same machine; ``run hello (MCP)`` at most 1.1x ``run hello (config)``.

    python benchmarks/bench_cli.py [--runs N] [--bub PATH | --no-bub] [--hookline PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

GOAL_RATIO = 0.25
MCP_GOAL_RATIO = 1.1
DEFAULT_BUB = Path("/work/venv-bub312/bin/bub")
SLOW_SERVER = Path(__file__).with_name("mcp_slow_server.py")


@dataclass
class Command:
    """One command to time: its argument vector, and whether it gets a fresh home (empty,
    or a copy of `home_config`'s home after one run of the command in it)."""

    label: str
    argv: list[str]
    fresh_home: bool = False
    home_config: str | None = None
    """The config file of the home the command's fresh homes are copied from."""
    template: Path | None = None
    # bub's own interpreter reads its own bytecode cache: a private prefix would only
    # make its first run slower, and it is warmed up like the others.
    own_cache: bool = True
    samples: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """CPU seconds (user and system) of each run's process and its waited-for children."""

    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1000.0


def hookline_argv(explicit: str | None) -> list[str]:
    """The console script next to this interpreter, else an equivalent ``-c`` call."""
    if explicit:
        return [explicit]
    script = Path(sys.executable).with_name("hookline")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from hookline.cli import main; "
            "sys.argv[0] = 'hookline'; sys.exit(main())"]


def bub_path(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    if DEFAULT_BUB.is_file():
        return str(DEFAULT_BUB)
    return shutil.which("bub")


def run_once(command: Command, env: Mapping[str, str], scratch: Path) -> tuple[float, float]:
    """Seconds one fresh process of `command` takes, and the CPU seconds it used; a failure
    is an error, not a time."""
    run_env = dict(env)
    if not command.own_cache:
        run_env.pop("PYTHONPYCACHEPREFIX", None)
    home = None
    if command.template is not None:
        home = Path(tempfile.mkdtemp(prefix="home-", dir=scratch)) / "home"
        shutil.copytree(command.template, home)
        run_env["HOOKLINE_HOME"] = str(home)
    elif command.fresh_home:
        home = Path(tempfile.mkdtemp(prefix="home-", dir=scratch))
        run_env["HOOKLINE_HOME"] = str(home)
    used = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(command.argv, env=run_env, cwd=scratch / "workspace",
                          stdin=subprocess.DEVNULL, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    used = _children_cpu() - used
    if home is not None:
        shutil.rmtree(home.parent if command.template else home, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"{command.label} failed ({done.returncode}): "
                         f"{done.stderr.decode(errors='replace').strip()}")
    return elapsed, used


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(commands: Sequence[Command], runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        (scratch / "workspace").mkdir()
        env = {name: value for name, value in os.environ.items()
               if name != "PYTHONDONTWRITEBYTECODE"
               and not name.startswith("HOOKLINE_")}
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
        # An empty home for the commands that do not get a fresh one: no user config.
        (scratch / "home").mkdir()
        env["HOOKLINE_HOME"] = str(scratch / "home")
        for command in commands:
            if command.home_config is not None:  # its home, after one run (a tape; a list)
                template = command.template = Path(tempfile.mkdtemp(dir=scratch)) / "home"
                template.mkdir(mode=0o700)
                (template / "config.toml").write_text(command.home_config)
                (template / "config.toml").chmod(0o600)
                run_once(dataclasses.replace(command, template=None, fresh_home=False),
                         {**env, "HOOKLINE_HOME": str(template)}, scratch)
        for command in commands:
            run_once(command, env, scratch)  # warm-up: writes the bytecode the runs read
        for _ in range(runs):
            for command in commands:
                elapsed, used = run_once(command, env, scratch)
                command.samples.append(elapsed)
                command.cpu.append(used)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, help="fresh processes per command")
    parser.add_argument("--bub", help=f"the bub command (default: {DEFAULT_BUB} if present)")
    parser.add_argument("--no-bub", action="store_true", help="do not run bub --help")
    parser.add_argument("--hookline", help="the hookline command (default: the console "
                                           "script next to this interpreter)")
    args = parser.parse_args(argv)

    hookline = hookline_argv(args.hookline)
    commands = [
        Command("python -c pass", [sys.executable, "-c", "pass"]),
        Command("hookline --help", [*hookline, "--help"]),
        Command("hookline --version", [*hookline, "--version"]),
        Command("hookline run hello", [*hookline, "run", "hello"], fresh_home=True),
    ]
    mcp = importlib.util.find_spec("mcp") is not None
    if mcp:
        server = (f"[mcp_servers.slow]\ncommand = {json.dumps(sys.executable)}\n"
                  f"args = [{json.dumps(str(SLOW_SERVER))}]\n")
        commands += [
            Command("run hello (config)", [*hookline, "run", "hello"], home_config="\n"),
            Command("run hello (MCP)", [*hookline, "run", "hello"], home_config=server),
        ]
    bub = None if args.no_bub else bub_path(args.bub)
    if bub is not None:
        commands.append(Command("bub --help", [bub, "--help"], own_cache=False))

    load = f", load {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} cpus{load}; median of {args.runs} fresh processes per command, "
          f"interleaved")
    measure(commands, args.runs)

    bare = commands[0].median_ms()
    reference = commands[-1].median_ms() if bub is not None else None
    print()
    print(f"{'command':<20} {'median ms':>10} {'vs python':>10} {'vs bub --help':>14}")
    for command in commands:
        value = command.median_ms()
        versus_bub = f"{value / reference:.2f}x" if reference else "-"
        print(f"{command.label:<20} {value:>10.1f} {value / bare:>9.2f}x {versus_bub:>14}")
    print()
    if reference is None:
        print("no bub --help to compare with (--bub PATH): no goal verdicts")
    else:
        for command in commands[1:]:
            if command.label not in ("hookline --help", "hookline run hello"):
                continue
            ratio = command.median_ms() / reference
            verdict = "PASS" if ratio <= GOAL_RATIO else "MISS"
            print(f"{verdict}  {command.label} <= {GOAL_RATIO:g}x bub --help: {ratio:.2f}x")
    if mcp:
        by_label = {command.label: command for command in commands}
        plain, served = by_label["run hello (config)"], by_label["run hello (MCP)"]
        ratio = served.median_ms() / plain.median_ms()
        cpu = statistics.median(served.cpu) / statistics.median(plain.cpu)
        verdict = "PASS" if ratio <= MCP_GOAL_RATIO else "MISS"
        print(f"{verdict}  run hello (MCP) <= {MCP_GOAL_RATIO:g}x run hello (config): "
              f"{ratio:.2f}x (CPU time {cpu:.2f}x)")
    else:
        print("the MCP SDK is not installed (pip install 'hookline[mcp]'): no MCP figures")
    if args.runs < 5:
        print(f"(--runs {args.runs}: too few runs for the verdicts to mean anything)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
