"""Sidecars, a recording store and entry filters for the Tape tests
(tests/builtins/tape/test_tape*.py)."""

from __future__ import annotations

from dataclasses import dataclass

from hookline.builtins.store import InMemoryTapeStore, as_async_store
from hookline.kernel.tape import TapeEntry, TapeQuery


@dataclass(frozen=True)
class Sidecar:
    name: str
    label: str = ""


class RecordingStore:
    """An async store over memory that logs operations and fails on request."""

    def __init__(self) -> None:
        self.inner = as_async_store(InMemoryTapeStore())
        self.log: list[tuple[str, str]] = []
        self.fail: set[tuple[str, str]] = set()

    def _check(self, op: str, tape: str) -> None:
        if (op, tape) in self.fail:
            raise OSError(f"{op} failed on {tape}")

    async def list_tapes(self) -> list[str]:
        return await self.inner.list_tapes()

    async def reset(self, tape: str) -> None:
        self._check("reset", tape)
        self.log.append(("reset", tape))
        await self.inner.reset(tape)

    async def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        self._check("fetch", query.tape)
        return list(await self.inner.fetch_all(query))

    async def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        self._check("append", tape)
        self.log.append(("append", tape))
        return await self.inner.append(tape, entry)


def kinds(entries: list[TapeEntry]) -> list[str]:
    return [entry.kind for entry in entries]


def events(entries: list[TapeEntry], name: str) -> list[TapeEntry]:
    return [e for e in entries if e.kind == "event" and e.payload["name"] == name]
