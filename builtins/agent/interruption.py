"""What a turn cut short leaves for the next request, so the model is never left to guess:
the text it had streamed (kept, marked `interrupted`), a result for each tool call it had
not answered (outcome `cancelled`: the call running may have partly run; one still waiting,
for its approval or its turn, did not run), and the `run` event whose status the context
shows as a note (`tape/context.py`)."""

from __future__ import annotations

from collections.abc import Collection

from ..store import open_call_results
from ..tape.tape import Tape

__all__ = ["CANCELLED_CALL", "NOT_STARTED_CALL", "close_cut_calls", "keep_partial_text"]

CANCELLED_CALL = ("The user cancelled the turn while this call ran, so it was stopped: it "
                  "may have partly run. Check what it would have changed before running it "
                  "again.")
NOT_STARTED_CALL = ("The user cancelled the turn before this call ran (while it waited for "
                    "its approval, or its turn): it did not run.")
RECENT = 500
"""Entries at the end of the tape read for the run's open calls."""


async def keep_partial_text(tape: Tape, run_id: str, model: str, text: str) -> None:
    """Text already streamed when the call ended early is recorded, marked interrupted."""
    if text:
        await tape.append("message", {"role": "assistant", "content": text},
                          run_id=run_id, model=model, interrupted=True)


async def close_cut_calls(tape: Tape, run_id: str, running: Collection[str] = ()) -> None:
    """A result for each call of the run that has none: the one `running` (its tool
    invoked) may have partly run; any other was waiting, for its approval or its turn,
    when the run was cancelled."""
    entries = await tape.entries(tape.query().tail(RECENT))
    ran = [(entry.kind, entry.payload) for entry in entries if entry.meta.get("run_id") == run_id]
    closing = open_call_results(ran, "cancelled", CANCELLED_CALL)
    if closing is not None:
        for result in closing.payload["results"]:
            if result["call_id"] not in running:
                result["output"] = result["error"] = NOT_STARTED_CALL
        await tape.append("tool_result", closing.payload, run_id=run_id)
