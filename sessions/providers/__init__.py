"""Model providers, the network edge: `anthropic` (Claude through the SDK), `local` (the offline
model's words, streamed), and one for a model this server cannot run.

They depend on nothing above the provider protocol (base.py): what a provider needs comes in
as arguments (`sessions.agent.provider` chooses and builds the provider of a session).
"""

from __future__ import annotations

from django.conf import settings

from . import catalog
from .base import (
    Provider,
    ProviderError,
    ProviderEvent,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    replayed,
)
from .catalog import LOCAL, ModelSpec

__all__ = [
    "LOCAL",
    "ModelSpec",
    "Provider",
    "ProviderError",
    "ProviderEvent",
    "StreamEnd",
    "TextDelta",
    "ThinkingDelta",
    "ToolCall",
    "claude",
    "label_for",
    "replayed",
]


def claude(model: str, *, max_tokens: int, stall_seconds: float) -> Provider:
    """Claude `model` through the SDK, with this server's key, endpoint and retries (offered
    or not: the caller chose it, e.g. the cheap model that writes titles)."""
    from .anthropic import AnthropicProvider

    return AnthropicProvider(
        model=model,
        api_key=settings.ANTHROPIC_API_KEY or None,
        base_url=settings.ANTHROPIC_BASE_URL,
        max_tokens=max_tokens,
        max_retries=settings.AGENTWEB_MAX_RETRIES,
        spec=catalog.spec(model),
        stall_seconds=stall_seconds,
    )


def warm_up() -> None:
    """When Claude is offered, import the SDK and build the client the generations share now,
    so that no one's first prompt waits for either (about a second, then 40 ms)."""
    if catalog.has_key() and settings.AGENTWEB_CLAUDE_MODELS:
        from .anthropic import AnthropicProvider

        model = settings.AGENTWEB_CLAUDE_MODELS[0]  # the client is the same for every model
        provider = claude(model, max_tokens=1, stall_seconds=settings.AGENTWEB_STALL_SECONDS)
        assert isinstance(provider, AnthropicProvider)
        provider.build_client_ahead()


def label_for(model: str) -> str:
    return catalog.spec(model).label if model else ""
