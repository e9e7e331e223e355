"""What `Tape.info()` and `Tape.anchors()` return: summaries read from a tape's entries."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hookline.kernel.tape import TapeEntry

__all__ = ["AnchorInfo", "TapeInfo"]


@dataclass(frozen=True)
class AnchorInfo:
    """An anchor of a tape: its entry id, name, state and date."""

    id: int
    name: str
    state: dict[str, Any]
    date: str


@dataclass(frozen=True)
class TapeInfo:
    """Summary of a tape (`Tape.info()`).

    `entries_since_last_anchor` counts every entry after the last anchor (all entries
    when there is none). `last_token_usage` is the `usage` dict of the most recent `event`
    entry carrying one in its `data`, in republic's `TokenUsage` field names;
    `cache_hit_rate` is its `cached_tokens / input_tokens` (`prompt_tokens` is accepted
    for input), None when unknown.
    """

    name: str
    entries: int
    anchors: int
    last_anchor: str | None
    entries_since_last_anchor: int
    last_token_usage: dict[str, Any] | None
    cache_hit_rate: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def anchor_info(entry: TapeEntry) -> AnchorInfo:
    """The anchor an `anchor` entry records."""
    state = entry.payload.get("state")
    return AnchorInfo(
        id=entry.id,
        name=str(entry.payload.get("name", "")),
        state=dict(state) if isinstance(state, dict) else {},
        date=entry.date,
    )


def tape_info(name: str, entries: list[TapeEntry]) -> TapeInfo:
    """The summary of the tape `name` holding `entries`."""
    last_index = -1
    anchor_count = 0
    for index, entry in enumerate(entries):
        if entry.kind == "anchor":
            anchor_count += 1
            last_index = index
    last_anchor = entries[last_index].payload.get("name") if last_index >= 0 else None
    usage = _last_usage(entries)
    return TapeInfo(
        name=name,
        entries=len(entries),
        anchors=anchor_count,
        last_anchor=None if last_anchor is None else str(last_anchor),
        entries_since_last_anchor=len(entries) - last_index - 1,
        last_token_usage=usage,
        cache_hit_rate=_cache_hit_rate(usage),
    )


def _last_usage(entries: list[TapeEntry]) -> dict[str, Any] | None:
    for entry in reversed(entries):
        if entry.kind != "event":
            continue
        data = entry.payload.get("data")
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict):
            return usage
    return None


def _cache_hit_rate(usage: dict[str, Any] | None) -> float | None:
    if not usage:
        return None
    total = usage.get("input_tokens", usage.get("prompt_tokens"))
    cached = usage.get("cached_tokens")
    if not isinstance(total, int | float) or not isinstance(cached, int | float) or total <= 0:
        return None
    return round(cached / total, 4)
