"""The models this server offers, with their context windows (settings.AGENTWEB_MODELS).

A session runs on an offered model: the offline model always, Claude models when
the server has an API key. A model that is not offered is explained in plain words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings

LOCAL = "local"
DEFAULT_WINDOW = 200_000
DEFAULT_MAX_OUTPUT = 8_192


@dataclass(frozen=True)
class ModelSpec:
    id: str
    label: str
    window: int  # tokens of context the model accepts
    max_output: int  # the max_tokens agentweb asks for

    @property
    def is_local(self) -> bool:
        return self.id == LOCAL

    @property
    def budget(self) -> int:
        """The most input tokens a request may carry: window - maximum output - a margin."""
        margin = math.ceil(self.window * settings.AGENTWEB_WINDOW_MARGIN)
        return max(0, self.window - self.max_output - margin)


def spec(model_id: str) -> ModelSpec:
    """The table's entry for a model id; an id the table lacks gets Claude's usual limits."""
    row: dict[str, Any] = settings.AGENTWEB_MODELS.get(model_id, {})
    return ModelSpec(
        id=model_id,
        label=str(row.get("label") or model_id),
        window=int(row.get("window") or DEFAULT_WINDOW),
        max_output=int(row.get("max_output") or DEFAULT_MAX_OUTPUT),
    )


def offered() -> list[ModelSpec]:
    """What a session may run on here: the offline model, and Claude when a key is set."""
    claude = list(dict.fromkeys(settings.AGENTWEB_CLAUDE_MODELS)) if has_key() else []
    return [spec(LOCAL), *(spec(model_id) for model_id in claude if model_id != LOCAL)]


def is_offered(model_id: str) -> bool:
    return any(model.id == model_id for model in offered())


def default_model() -> str:
    """The server's default: AGENTWEB_MODEL when it is offered, else the offline model."""
    return settings.AGENTWEB_MODEL if is_offered(settings.AGENTWEB_MODEL) else LOCAL


def has_key() -> bool:
    return bool(settings.ANTHROPIC_API_KEY)


def unavailable_reason(model_id: str) -> str:
    """Why a model cannot run here, in words a person can act on."""
    if model_id != LOCAL and not has_key():
        return (
            f"{spec(model_id).label} needs an Anthropic API key, and this server has none "
            "(ANTHROPIC_API_KEY is not set). Choose another model for this session."
        )
    return f"{spec(model_id).label} is not offered on this server. Choose another model."
