"""The folder's current session file: bounded, private, and never a hang or a crash when
it is damaged or replaced by something else (`hookline.builtins.tape.sessions`)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from hookline.builtins.tape import sessions
from hookline.builtins.tape.sessions import (
    CURRENT_SESSIONS_FILE,
    DEFAULT_SESSION,
    current_session,
    new_session_id,
    set_current_session,
)


def test_each_folder_has_its_current_session(tmp_path: Path) -> None:
    home, one, two = tmp_path / "home", tmp_path / "one", tmp_path / "two"
    assert current_session(home, one) == DEFAULT_SESSION
    set_current_session(home, one, "cli:a")
    set_current_session(home, two, "cli:b")
    assert (current_session(home, one), current_session(home, two)) == ("cli:a", "cli:b")
    assert current_session(home, one / ".." / "one") == "cli:a"  # the resolved folder
    assert (home / CURRENT_SESSIONS_FILE).stat().st_mode & 0o777 == 0o600


def test_the_file_keeps_the_most_recently_set_folders(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "MAX_CURRENT_SESSIONS", 3)
    home = tmp_path / "home"
    for index in range(5):
        set_current_session(home, tmp_path / f"f{index}", f"cli:{index}")
    set_current_session(home, tmp_path / "f2", "cli:again")  # set again: newest
    kept = {index: current_session(home, tmp_path / f"f{index}") for index in range(5)}
    assert kept == {0: DEFAULT_SESSION, 1: DEFAULT_SESSION, 2: "cli:again", 3: "cli:3",
                    4: "cli:4"}


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b"[1, 2]", b'{"x": 5}'])
def test_a_damaged_file_puts_every_folder_back_on_the_default(tmp_path: Path,
                                                              content: bytes) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / CURRENT_SESSIONS_FILE).write_bytes(content)
    assert current_session(home, tmp_path / "x") == DEFAULT_SESSION
    set_current_session(home, tmp_path / "x", "cli:new")  # and it is repaired on write
    assert current_session(home, tmp_path / "x") == "cli:new"


def test_a_fifo_or_a_link_is_not_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / CURRENT_SESSIONS_FILE)
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(current_session(home, tmp_path)),
                              daemon=True)
    worker.start()
    worker.join(5)
    assert result == [DEFAULT_SESSION], "a FIFO in place of the file blocked"
    os.unlink(home / CURRENT_SESSIONS_FILE)
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps({str(tmp_path.resolve()): "cli:planted"}))
    (home / CURRENT_SESSIONS_FILE).symlink_to(planted)
    assert current_session(home, tmp_path) == DEFAULT_SESSION


def test_new_ids_are_distinct_and_say_when() -> None:
    ids = {new_session_id() for _ in range(50)}
    assert len(ids) > 40 and all(item.startswith("cli:20") for item in ids)
