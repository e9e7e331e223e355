"""Server-Sent Events as the gateway writes them: whatever the text, each event's data is
one line for every line-splitting client, and decodes to the same value."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from hookline.builtins.channels.http.wire import dumps, sse

LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@given(st.text(alphabet=st.sampled_from(LINE_BREAKS) | st.characters(codec="utf-8")))
def test_an_event_is_two_lines_whatever_its_text(text: str) -> None:
    event = sse("text", {"delta": text}).decode("utf-8")
    lines = event.splitlines()
    assert len(lines) == 3 and lines[0] == "event: text" and lines[2] == ""
    assert event.endswith("\n\n") and lines[1].startswith("data: ")
    assert json.loads(lines[1][len("data: "):]) == {"delta": text}


def test_json_answers_escape_the_same_line_breaks() -> None:
    assert dumps({"a": "x\u2028y\u2029z\x85"}) == b'{"a": "x\\u2028y\\u2029z\\u0085"}'
    assert dumps("é") == '"é"'.encode()
