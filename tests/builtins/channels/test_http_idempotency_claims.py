"""Keys claimed in this process first: two requests with one `Idempotency-Key` that reach
one replica at once must not both pass the store's claim (a PostgreSQL replica's advisory
lock lets every request of its own pass), so the second waits for the first here and gets
its reply; a request told to send it again (a 503) leaves its key to the store."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hookline.builtins.channels.http.idempotency import Idempotency
from hookline.builtins.channels.http.reply import Reply

pytestmark = pytest.mark.anyio


class ReentrantRecords:
    """A store whose claim every request of the process passes, as a replica's own
    session-level advisory lock does; each look at it takes a moment."""

    def __init__(self) -> None:
        self.claims = 0
        self.recalls = 0

    async def recall(self, session_id: str, mark: str, value: str, max_age: float) -> Any:
        self.recalls += 1
        await anyio.sleep(0.01)
        return None

    async def claim(self, session_id: str, key: str) -> bool:
        self.claims += 1
        await anyio.sleep(0.01)
        return True

    async def release(self, session_id: str, key: str) -> None:
        await anyio.sleep(0)


async def test_two_requests_with_one_key_at_once_run_once() -> None:
    records = ReentrantRecords()
    keys = Idempotency(records=records)  # type: ignore[arg-type]
    answers: list[Any] = []

    async def request(name: str) -> None:
        prior = await keys.prior("k", "digest", "s")
        if prior is None:  # it runs: as _post_message does, it starts at once
            keys.started("k", "digest", Reply(name, "s", False))
        answers.append((name, prior))

    async with anyio.create_task_group() as group:
        for name in ("first", "second", "third"):
            group.start_soon(request, name)
    ran = [name for name, prior in answers if prior is None]
    assert len(ran) == 1 and records.claims == 1
    replayed = [prior for _name, prior in answers if prior is not None]
    assert len(replayed) == 2 and all(isinstance(r, Reply) and r.id == ran[0] for r in replayed)


async def test_a_request_told_to_send_it_again_leaves_its_key_to_the_store() -> None:
    records = ReentrantRecords()
    keys = Idempotency(records=records)  # type: ignore[arg-type]
    assert await keys.prior("k", "digest", "s") is None
    keys.started("k", "digest", Reply("first", "s", False))
    await keys.release("k", "s", forget=True)
    assert await keys.prior("k", "digest", "s") is None, "the store says it never ran"
    assert records.recalls == 4, "each looks at the store again once it claimed the key"


class EndsMeanwhile(ReentrantRecords):
    """A first request, on another gateway, ends and lets go of its claim while the
    retry's first look reads the store: the second look finds what it came to."""

    def __init__(self) -> None:
        super().__init__()
        self.released = 0

    async def recall(self, session_id: str, mark: str, value: str, max_age: float) -> Any:
        await super().recall(session_id, mark, value, max_age)
        return ("digest", 200, {"status": "ok", "content": "ran once"}) \
            if self.recalls > 1 else None

    async def release(self, session_id: str, key: str) -> None:
        self.released += 1


async def test_a_key_claimed_after_its_first_request_ended_answers_what_it_came_to() -> None:
    records = EndsMeanwhile()
    keys = Idempotency(records=records)  # type: ignore[arg-type]
    assert await keys.prior("k", "digest", "s") == (200, {"status": "ok",
                                                          "content": "ran once"})
    assert (records.claims, records.released) == (1, 1), "the claim taken is let go"


async def test_a_second_request_waits_for_a_first_that_lets_go_then_claims_itself() -> None:
    keys = Idempotency(records=ReentrantRecords())  # type: ignore[arg-type]
    assert await keys.prior("k", "d", "s") is None  # claimed, not started
    later: list[Any] = []

    async def second() -> None:
        later.append(await keys.prior("k", "d", "s"))

    async with anyio.create_task_group() as group:
        group.start_soon(second)
        await anyio.sleep(0.05)
        assert later == [], "it waits while the first holds the key"
        await keys.release("k", "s")  # the first never ran (the gateway stopped)
    assert later == [None]


def test_kept_answers_are_bounded_by_their_characters_too() -> None:
    """A thousand long replies would hold hundreds of MiB: the oldest go once the kept
    replies pass their character budget; the newest is kept whatever its size."""
    from hookline.builtins.channels.http.kept import KeptReplies

    kept = KeptReplies(max_chars=1000)
    for index in range(5):
        kept.keep(f"r{index}", 200, {"content": "x" * 300,
                                     "outbounds": [{"content": "x" * 300}]})
    assert [kept.get(f"r{index}") is not None for index in range(5)] == [
        False, False, False, False, True]
    kept.keep("huge", 200, {"content": "y" * 5000, "outbounds": []})
    assert kept.get("huge") is not None and kept.get("r4") is None


async def test_seen_keys_are_bounded_by_their_replies_characters(monkeypatch: Any) -> None:
    """The older keys are still found in the store, so the process need not hold them."""
    from hookline.builtins.channels.http import idempotency

    monkeypatch.setattr(idempotency, "MAX_KEPT_CHARS", 1000)
    keys = Idempotency(records=ReentrantRecords())  # type: ignore[arg-type]
    for index in range(4):
        assert await keys.prior(f"k{index}", "d", "s") is None
        reply = Reply(f"r{index}", "s", False)
        reply.outbounds.append({"content": "x" * 600})
        keys.started(f"k{index}", "d", reply)
    assert [named[1] for named in keys._seen] == ["k3"]
