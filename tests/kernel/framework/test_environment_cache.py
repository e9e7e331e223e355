"""The environment cache is bounded: a size bound, an idle expiry, evicted environments
closed (inside a scope), and never the environment of a session a running turn holds."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from recorders import FakeEnvironment

from hookline.kernel import hookimpl
from hookline.kernel.framework.core import Framework
from hookline.kernel.framework.envcache import EnvironmentCache
from hookline.kernel.turn import RUNTIME_ENVIRONMENT


class Recorded(FakeEnvironment):
    """An environment that remembers whether it was closed, and how often."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id, [])
        self.session_id = session_id

    @property
    def closes(self) -> int:
        return len(self.log)

    @property
    def closed(self) -> bool:
        return bool(self.log)


class Sessions:
    """Provides a Recorded environment per request and answers every turn; a turn whose
    content is "wait" parks in the model until `release` is set."""

    def __init__(self) -> None:
        self.made: list[Recorded] = []
        self.parked = anyio.Event()
        self.release = anyio.Event()
        self.seen_closed: list[bool] = []

    @hookimpl
    def provide_environment(self, session_id, workspace):
        environment = Recorded(session_id)
        self.made.append(environment)
        return environment

    @hookimpl
    async def run_model(self, prompt, session_id, state):
        environment = state[RUNTIME_ENVIRONMENT]
        if prompt == "wait":
            self.parked.set()
            await self.release.wait()
        self.seen_closed.append(environment.closed)
        return "ok"


def make_framework(tmp_path: Path, max_size: int) -> tuple[Framework, Sessions]:
    framework = Framework(workspace=tmp_path)
    framework.environments.max_size = max_size
    sessions = Sessions()
    framework.registry.register(sessions, name="sessions")
    return framework, sessions


@pytest.mark.anyio
async def test_the_cache_never_holds_more_than_its_bound(tmp_path: Path) -> None:
    framework, sessions = make_framework(tmp_path, max_size=3)
    async with framework.running():
        for number in range(20):
            await framework.process_inbound({"content": "hi", "session_id": f"s{number}"})
            assert len(framework.environments) <= 3
        assert framework.environments.sessions() == ["s17", "s18", "s19"]
        assert [e.closed for e in sessions.made] == [True] * 17 + [False] * 3
        # An evicted session that comes back gets a fresh environment.
        await framework.process_inbound({"content": "hi", "session_id": "s0"})
        assert len(sessions.made) == 21 and sessions.made[-1].session_id == "s0"
        assert framework.environments.sessions() == ["s18", "s19", "s0"]
        assert sessions.made[17].closed
    assert all(e.closes == 1 for e in sessions.made), "each closed exactly once"
    assert not any(sessions.seen_closed), "no turn saw its environment closed"


@pytest.mark.anyio
async def test_a_session_held_by_a_running_turn_is_never_evicted(tmp_path: Path) -> None:
    framework, sessions = make_framework(tmp_path, max_size=2)
    async with framework.running(), anyio.create_task_group() as group:
        group.start_soon(framework.process_inbound, {"content": "wait", "session_id": "busy"})
        await sessions.parked.wait()
        [busy] = sessions.made
        for number in range(5):
            await framework.process_inbound({"content": "hi", "session_id": f"s{number}"})
            # The held session stays; the others respect the bound among themselves.
            assert "busy" in framework.environments.sessions()
            assert len(framework.environments) <= 2 + 1
        assert not busy.closed
        sessions.release.set()
    assert sessions.seen_closed == [False] * 6, "the busy turn kept an open environment"
    assert busy.closes == 1


@pytest.mark.anyio
async def test_the_held_session_is_evicted_after_its_turn(tmp_path: Path) -> None:
    framework, sessions = make_framework(tmp_path, max_size=1)
    async with framework.running():
        async with anyio.create_task_group() as group:
            group.start_soon(framework.process_inbound,
                             {"content": "wait", "session_id": "busy"})
            await sessions.parked.wait()
            await framework.process_inbound({"content": "hi", "session_id": "other"})
            assert framework.environments.sessions() == ["busy", "other"]  # over, held
            sessions.release.set()
        await framework.process_inbound({"content": "hi", "session_id": "third"})
        assert framework.environments.sessions() == ["third"]
        busy, other, third = sessions.made
        assert busy.closed and other.closed and not third.closed


@pytest.mark.anyio
async def test_idle_environments_expire(tmp_path: Path) -> None:
    now = [1000.0]
    framework = Framework(workspace=tmp_path)
    framework.environments = EnvironmentCache(max_size=10, idle_seconds=60,
                                              clock=lambda: now[0])
    sessions = Sessions()
    framework.registry.register(sessions, name="sessions")
    async with framework.running():
        old = await framework.get_environment("old")
        kept = await framework.get_environment("kept")
        now[0] += 50
        assert framework.cached_environment("kept") is kept  # a read is a use
        now[0] += 20  # old: idle 70 s, kept: idle 20 s
        with framework.environments.hold("old"):
            assert await framework.close_idle_environments() == 0, "held: not evicted"
        # The end of the hold (of a turn) is a use too: old is the most recent now.
        assert framework.environments.sessions() == ["kept", "old"]
        now[0] += 45  # old: idle 45 s, kept: idle 65 s
        assert await framework.close_idle_environments() == 1
        assert kept.closed and not old.closed
        now[0] += 100
        # Idle entries also go when a new environment is requested.
        fresh = await framework.get_environment("fresh")
        assert old.closed and not fresh.closed
        assert framework.environments.sessions() == ["fresh"]


@pytest.mark.anyio
async def test_outside_a_scope_evicted_environments_are_forgotten_not_closed(
    tmp_path: Path,
) -> None:
    framework, sessions = make_framework(tmp_path, max_size=2)
    for name in ("a", "b", "c"):
        await framework.get_environment(name)
    assert framework.environments.sessions() == ["b", "c"]
    assert not any(e.closed for e in sessions.made), "the host owns them"


def test_the_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="max_size must be at least 1"):
        EnvironmentCache(max_size=0)
    with pytest.raises(ValueError, match="idle_seconds must be positive"):
        EnvironmentCache(idle_seconds=0)
