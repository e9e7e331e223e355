"""TurnResult, reserved state keys and model option merging."""

from __future__ import annotations

import dataclasses

import pytest

from hookline.kernel import turn
from hookline.kernel.models import ModelChoice, ModelOptions, merge_model_options
from hookline.kernel.turn import TurnResult


def test_turn_result_defaults_and_frozen() -> None:
    result = TurnResult("s", ["hello"], "answer")
    assert result.outbounds == []
    assert result.state == {}
    assert TurnResult("s", [], "").outbounds is not result.outbounds
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.model_output = "x"  # type: ignore[misc]


def test_reserved_state_keys() -> None:
    assert turn.RUNTIME_WORKSPACE == "_runtime_workspace"
    assert turn.RUNTIME_STEERING_INBOX == "_runtime_steering_inbox"
    assert turn.RUNTIME_ENVIRONMENT == "_runtime_environment"
    assert turn.RUNTIME_AGENT == "_runtime_agent"
    assert turn.RUNTIME_THREAD_ID == "_runtime_thread_id"
    assert turn.RUNTIME_TAPE == "_runtime_tape"
    assert turn.RUNTIME_TOOL_NAMES == "_runtime_tool_names"
    names = [value for key, value in vars(turn).items() if key.startswith("RUNTIME_")]
    assert all(name.startswith(turn.RUNTIME_PREFIX) for name in names)


def test_merge_model_options() -> None:
    a = ModelChoice("openai:gpt-x", name="GPT X")
    b = ModelChoice("ollama:llama", description="local")
    c = ModelChoice("openai:gpt-x")
    merged = merge_model_options(
        [
            ModelOptions([a], current_model=None),
            ModelOptions([b, c], current_model="ollama:llama"),
            ModelOptions([], current_model="other:model"),
        ]
    )
    assert merged == ModelOptions([a, b, c], current_model="ollama:llama")
    assert merge_model_options([]) is None
    assert merge_model_options(iter([ModelOptions()])) == ModelOptions([], None)
    assert merge_model_options([ModelOptions(current_model="")]) == ModelOptions([], None)


def test_model_types_are_frozen() -> None:
    choice = ModelChoice("a:b", meta={"ctx": 8000})
    with pytest.raises(dataclasses.FrozenInstanceError):
        choice.id = "c"  # type: ignore[misc]
    assert ModelOptions().models == []


def test_a_message_read_from_a_dict_owns_its_blocks() -> None:
    """The dict may be a store's shared entry: a hook changing the message's blocks must
    leave it as it was."""
    from hookline.kernel.messages import ModelMessage

    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
    data = {"role": "user", "content": [{"type": "text", "text": "see"}, image]}
    message = ModelMessage.from_dict(data)
    assert message.content == ["see", image]
    message.content[1]["image_url"]["url"] = "changed"
    assert image == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
