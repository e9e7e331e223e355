"""Claims on request keys between processes sharing one SQLite store (`claims.py`): one
holder at a time, this process included; a claim lapses with its holder, and what a killed
holder left is removed by the next process that claims."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from hookline.builtins.store.sqlite.claims import KeyClaims


def test_a_key_has_one_holder_this_process_included(tmp_path: Path) -> None:
    mine, other = KeyClaims(tmp_path / "tapes.db"), KeyClaims(tmp_path / "tapes.db")
    assert mine.claim("t", "k")
    assert not mine.claim("t", "k"), "a second request of the key waits, here too"
    assert not other.claim("t", "k")
    assert other.claim("t", "another key") and other.claim("another tape", "k")
    mine.release("t", "k")
    assert other.claim("t", "k")


def test_a_killed_holder_s_claims_lapse_and_their_files_go(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from pathlib import Path\n"
         "from hookline.builtins.store.sqlite.claims import KeyClaims\n"
         f"claims = KeyClaims(Path({str(tmp_path / 'tapes.db')!r}))\n"
         "for n in range(20): claims.claim('t', f'k{n}')\n"
         "print('held', flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    folder = tmp_path / "tapes.db-claims"
    assert len(os.listdir(folder)) == 20
    assert not KeyClaims(tmp_path / "tapes.db").claim("t", "k3")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    holder.stdout.close()
    after = KeyClaims(tmp_path / "tapes.db")
    assert after.claim("t", "k3"), "lapsed with its holder"
    assert os.listdir(folder) == [after._name("t", "k3")], "the lapsed claims' files went"
