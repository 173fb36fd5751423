"""Model providers: `anthropic` (Claude through the SDK) and `local` (offline)."""

from __future__ import annotations

from django.conf import settings

from .base import Provider, ProviderError, StreamEnd, TextDelta, Usage

__all__ = [
    "Provider",
    "ProviderError",
    "StreamEnd",
    "TextDelta",
    "Usage",
    "get_provider",
    "label_for",
]

LOCAL = "local"


def get_provider(model: str) -> Provider:
    """The provider for a session's model name: `local`, or a Claude model id."""
    if model == LOCAL:
        from .local import LocalProvider

        return LocalProvider(token_delay=settings.AGENTWEB_LOCAL_TOKEN_DELAY)
    from .anthropic import AnthropicProvider

    return AnthropicProvider(
        model=model,
        api_key=settings.ANTHROPIC_API_KEY or None,
        base_url=settings.ANTHROPIC_BASE_URL,
        max_tokens=settings.AGENTWEB_MAX_TOKENS,
        max_retries=settings.AGENTWEB_MAX_RETRIES,
    )


def label_for(model: str) -> str:
    return "Offline model (local)" if model == LOCAL else model
