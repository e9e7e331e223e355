"""Model menus offered by plugins (`provide_model_options`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ModelChoice", "ModelOptions", "merge_model_options"]


@dataclass(frozen=True)
class ModelChoice:
    """One selectable model; `id` is the `provider:model` spec."""

    id: str
    name: str | None = None
    description: str | None = None
    meta: dict[str, Any] | None = None


@dataclass(frozen=True)
class ModelOptions:
    """The models one plugin offers and the one it considers current."""

    models: list[ModelChoice] = field(default_factory=list)
    current_model: str | None = None


def merge_model_options(options: Iterable[ModelOptions]) -> ModelOptions | None:
    """Combine plugin answers given in priority order.

    Models are concatenated as given (no de-duplication: the caller decides how to show
    them); the current model is the first truthy one. None when nobody answered.
    """
    collected = list(options)
    if not collected:
        return None
    models = [choice for option in collected for choice in option.models]
    current = next((option.current_model for option in collected if option.current_model), None)
    return ModelOptions(models=models, current_model=current)
