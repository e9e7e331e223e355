"""The session id cap: the builtin resolve_session refuses a `session_id` or `chat_id`
longer than MAX_SESSION_ID_LENGTH, for every channel, before anything is keyed on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookline.builtins.config import Settings
from hookline.builtins.config.limits import MAX_SESSION_ID_LENGTH
from hookline.builtins.plugin import BuiltinPlugin
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.framework.core import Framework


class Router:
    """Collects what the builtin dispatch_outbound and on_error send."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def dispatch(self, message: Any) -> bool:
        self.sent.append(message)
        return True


def make_framework(tmp_path: Path) -> tuple[Framework, Router]:
    framework = Framework(workspace=tmp_path)
    plugin = BuiltinPlugin(framework, settings=Settings(home=tmp_path / "home"))
    framework.registry.register(plugin, name="builtin")
    router = Router()
    framework.router = router
    return framework, router


@pytest.mark.anyio
@pytest.mark.parametrize("field", ["session_id", "chat_id"])
async def test_an_over_long_id_fails_the_turn_with_a_clear_error(
    tmp_path: Path, field: str
) -> None:
    framework, router = make_framework(tmp_path)
    long_id = "x" * (MAX_SESSION_ID_LENGTH + 1)
    async with framework.running():
        with pytest.raises(HooklineError) as caught:
            await framework.process_inbound({"content": "hi", "channel": "web", field: long_id})
        assert framework.get_tape_store().list_tapes() == [], "nothing was recorded"
        assert len(framework.environments) == 0, "nothing was cached for it"
    error = caught.value
    assert error.kind is ErrorKind.invalid_input
    assert error.message == (
        f"{field} of a message on channel 'web' is 257 characters long; at most 256 are "
        f"accepted (MAX_SESSION_ID_LENGTH): send a shorter {field}, for example a hash of "
        f"the long one")
    assert error.details == {"field": field, "length": 257, "limit": 256}
    [outbound] = router.sent  # on_error told the conversation's channel
    assert outbound["kind"] == "error" and "stage 'turn'" in outbound["content"]


@pytest.mark.anyio
async def test_ids_at_the_cap_are_accepted(tmp_path: Path) -> None:
    framework, router = make_framework(tmp_path)
    at_cap = "y" * MAX_SESSION_ID_LENGTH
    async with framework.running():
        by_session = await framework.process_inbound({"content": "hi", "session_id": at_cap})
        by_chat = await framework.process_inbound({"content": "hi", "channel": "web",
                                                   "chat_id": at_cap})
    assert by_session.session_id == at_cap
    assert by_chat.session_id == f"web:{at_cap}"
    assert [m["kind"] for m in router.sent] == ["normal", "normal"]
