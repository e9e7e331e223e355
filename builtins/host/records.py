"""The process record: what an open scope owns, on disk, so that what a hookline killed
with SIGKILL (or a crash) left running is ended by the next start (Linux: /proc).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path

from ..privacy.files import make_private_dir, write_private_file
from .processes import STOP_GRACE
from .proctable import HAS_PROC, boot_id, end_exact, environ_has, process_table, read_proc

__all__ = ["OWNER_ENV", "ProcessRecord", "end_leftovers", "open_record"]

logger = logging.getLogger(__name__)

OWNER_ENV = "HOOKLINE_PROCESS_OWNER"
"""Environment variable naming the scope that owns a process (inherited by descendants)."""


class ProcessRecord:
    """What one open scope owns, in a file of its own under a records directory.

    `<dir>/<pid>-<owner>.json` holds the hookline process (pid and start time), the boot
    it runs in, the scope's owner token, the sessions it started (leader pid and start
    time) and the escaped descendants it adopted (pid and start time). It is rewritten as
    processes start and removed when the scope closes, so a file whose hookline process is
    gone is the mark of an instance that died without closing its scope (SIGKILL, a crash):
    `end_leftovers` ends what it left running.
    """

    VERSION = 1

    def __init__(self, path: Path, owner: str) -> None:
        self.path = path
        me = read_proc(os.getpid())
        self.head = {"version": self.VERSION, "pid": os.getpid(),
                     "start": me.start if me is not None else 0, "boot_id": boot_id(),
                     "owner": owner}

    def write(self, sessions: list[tuple[int, int]], adopted: list[tuple[int, int]]) -> None:
        """Replace the file (a whole new file renamed over the old one, never half written)."""
        data = {**self.head, "sessions": sessions, "adopted": adopted}
        write_private_file(self.path, json.dumps(data), durable=False)  # 0600, in a 0700 dir

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


def open_record(directory: Path, owner: str, grace: float) -> ProcessRecord | None:
    """End what dead instances left (one log line each), then start this scope's record.

    A records directory that cannot be used is logged and skipped: the scope still runs,
    only the protection against a later SIGKILL is lost.
    """
    if not HAS_PROC:
        return None
    try:
        make_private_dir(directory)
        for line in end_leftovers(directory, grace):
            logger.warning(line)
        record = ProcessRecord(directory / f"{os.getpid()}-{owner}.json", owner)
        record.write([], [])
    except OSError as exc:
        logger.warning("processes.record_unavailable dir=%s error=%s: %s; processes left by a "
                       "killed hookline will not be ended at the next start; make the folder "
                       "writable", directory, type(exc).__name__, exc)
        return None
    return record


def end_leftovers(directory: Path, grace: float = STOP_GRACE) -> list[str]:
    """End the processes recorded by instances that are gone; one line per such instance.

    For each record whose hookline process no longer runs (same boot), it ends: every
    process carrying the record's owner token in its environment, every member of a
    recorded session whose leader is still the recorded process, and every recorded
    adopted process that is still the one recorded (pid and start time). This process and
    its ancestors are never touched. The record is removed afterwards.
    """
    lines = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            owner, pid, start = str(data["owner"]), int(data["pid"]), int(data["start"])
            sessions = [(int(s), int(t)) for s, t in data.get("sessions", [])]
            adopted = [(int(p), int(t)) for p, t in data.get("adopted", [])]
        except FileNotFoundError:  # another start took care of it
            continue
        except (OSError, ValueError, KeyError, TypeError) as exc:
            lines.append(f"processes.record_ignored path={path} error={type(exc).__name__}: "
                         f"{exc}; delete the file if no hookline uses it")
            continue
        if data.get("boot_id") != boot_id():  # everything it owned died with that boot
            path.unlink(missing_ok=True)
            continue
        owner_info = read_proc(pid)
        if owner_info is not None and owner_info.start == start and not owner_info.zombie:
            continue  # still running: its processes are its own business
        ended = end_exact(_leftover_targets(owner, sessions, adopted), grace)
        path.unlink(missing_ok=True)
        if ended:
            listed = " ".join(map(str, sorted(ended)))
            lines.append(f"processes.leftovers_ended count={len(ended)} pid={pid}: ended "
                         f"{len(ended)} process(es) left running by hookline pid {pid}, "
                         f"which died without closing its scope (pids {listed})")
    return lines


def _leftover_targets(owner: str, sessions: list[tuple[int, int]],
                      adopted: list[tuple[int, int]]) -> list[tuple[int, int]]:
    table = process_table()
    by_pid = {info.pid: info for info in table}
    spared = set()  # this process and its ancestors, whatever they carry
    pid = os.getpid()
    while pid in by_pid and pid not in spared:
        spared.add(pid)
        pid = by_pid[pid].ppid
    verified = {sid for sid, start in sessions
                if sid in by_pid and by_pid[sid].start == start}
    marker = f"{OWNER_ENV}={owner}"
    targets = [(info.pid, info.start) for info in table
               if not info.zombie and info.pid not in spared
               and (info.session in verified or environ_has(info.pid, marker))]
    targets += [(p, start) for p, start in adopted
                if p in by_pid and by_pid[p].start == start and p not in spared]
    return targets
