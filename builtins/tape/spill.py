"""The spill sidecar: oversized tool results moved out of the model context.

The builtin plugin mounts a `SpillSidecar` (name `spill`) on every session tape and runs
`spill_result` as its trylast `after_tool_call`. When the text the model would see is
longer than `limit` characters, the whole text is appended to the sidecar's tape as a
`spill` event (`{"id", "tool", "run_id", "arguments", "chars", "text"}`) and the model gets
only the first `head` characters followed by a note naming the spill id; the `spill.read`
tool (model name `spill_read`) pages through the rest.

A plugin can change the limits by providing its own `SpillSidecar(limit=..., head=...)`
(sidecars are de-duplicated by name, first in priority order wins). When the mounted
`spill` sidecar is not a `SpillSidecar`, results are left alone.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from hookline.kernel.interception import ToolCall, ToolCallResult
from hookline.kernel.tape import TapeEntry
from hookline.kernel.turn import RUNTIME_TAPE

__all__ = [
    "SPILL_EVENT",
    "SPILL_READ_TOOLS",
    "SPILL_SIDECAR",
    "SpillSidecar",
    "find_spill",
    "spill_result",
]

SPILL_SIDECAR: Final = "spill"
"""The sidecar's name; its tape is `<session tape>__sidecar__spill`."""

SPILL_EVENT: Final = "spill"
"""The name of the event entry holding one spilled result."""

SPILL_READ_TOOLS: Final = frozenset({"spill.read", "spill_read"})
"""Results of the reading tool itself are never spilled (they are paged already)."""


@dataclass(frozen=True)
class SpillSidecar:
    """Where oversized tool results go: `limit` and `head` are counted in characters."""

    name: str = SPILL_SIDECAR
    limit: int = 16_000
    head: int = 2_000

    def __post_init__(self) -> None:
        if self.limit < 1 or not 0 <= self.head <= self.limit:
            raise ValueError(
                f"SpillSidecar needs limit >= 1 and 0 <= head <= limit, "
                f"got limit={self.limit} head={self.head}"
            )

    def cut(self, text: str, spill_id: str) -> str:
        """The model-facing replacement: the head of `text` and a note on the rest."""
        shown = text[: self.head]
        note = (
            f"[output cut: showing the first {len(shown):,} of {len(text):,} characters. "
            f"The full output is stored as spill '{spill_id}'; read the rest with "
            f'spill_read(id="{spill_id}", offset={len(shown)}).]'
        )
        return f"{shown}\n...\n{note}" if shown else note


def model_text(value: Any) -> str:
    """The text the model is shown for a result value (as the agent loop renders it)."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


async def spill_result(
    call: ToolCall | None, result: ToolCallResult, state: Mapping[str, Any]
) -> TapeEntry | None:
    """Move `result.result` into the run tape's spill sidecar when it is too long.

    Returns the sidecar entry written, or None when the result was left as it is: no
    result, the reading tool's own output, no run tape, no mounted `SpillSidecar`, or a
    text within the limit.
    """
    if result.result is None or result.tool in SPILL_READ_TOOLS:
        return None
    tape = state.get(RUNTIME_TAPE)
    if tape is None and call is not None and call.context is not None:
        tape = call.context.tape
    if tape is None:
        return None
    sidecar = tape.get_sidecar(SPILL_SIDECAR)
    if not isinstance(sidecar, SpillSidecar):
        return None
    text = model_text(result.result)
    if len(text) <= sidecar.limit:
        return None
    spill_id = f"spill-{uuid.uuid4().hex[:12]}"
    data = {
        "id": spill_id,
        "tool": result.tool,
        "run_id": result.run_id,
        "arguments": dict(result.arguments),
        "chars": len(text),
        "text": text,
    }
    entry = await tape.sidecar_tape(SPILL_SIDECAR).append_event(
        SPILL_EVENT, data, run_id=result.run_id
    )
    result.result = sidecar.cut(text, spill_id)
    return entry


async def find_spill(tape: Any, spill_id: str) -> dict[str, Any] | None:
    """The data of the spill called `spill_id` on `tape`'s spill sidecar, or None.

    Raises KeyError when the tape has no `spill` sidecar mounted.
    """
    sidecar_tape = tape.sidecar_tape(SPILL_SIDECAR)
    for entry in reversed(await sidecar_tape.entries(sidecar_tape.query().query(spill_id))):
        if entry.kind != "event" or entry.payload.get("name") != SPILL_EVENT:
            continue
        data = entry.payload.get("data")
        if isinstance(data, dict) and data.get("id") == spill_id:
            return data
    return None
