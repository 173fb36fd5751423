"""Model providers: `anthropic` (Claude through the SDK) and `local` (offline)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

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
    Usage,
)
from .catalog import LOCAL, ModelSpec

__all__ = [
    "LOCAL",
    "ModelSpec",
    "Provider",
    "ProviderError",
    "StreamEnd",
    "TextDelta",
    "ThinkingDelta",
    "ToolCall",
    "Usage",
    "claude",
    "get_provider",
    "label_for",
]


def get_provider(model: str) -> Provider:
    """The provider for a session's model: `local`, an offered Claude model, or one that
    explains why the model cannot run here."""
    if not catalog.is_offered(model):
        return UnavailableProvider(model)
    spec = catalog.spec(model)
    if model == LOCAL:
        from .local import LocalProvider

        return LocalProvider(token_delay=settings.AGENTWEB_LOCAL_TOKEN_DELAY, spec=spec)
    return claude(model, max_tokens=spec.max_output, stall_seconds=settings.AGENTWEB_STALL_SECONDS)


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
    """Import the SDK now when Claude is offered, so that no one's first prompt waits for it."""
    if catalog.has_key():
        from . import anthropic  # noqa: F401


def label_for(model: str) -> str:
    return catalog.spec(model).label if model else ""


class UnavailableProvider(Provider):
    """A model this server does not offer: every call fails with the reason, in plain words."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.spec = catalog.spec(model)

    async def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        system: str | None = None,
        max_tokens: int | None = None,
        thinking_budget: int = 0,
        tools: Sequence[dict[str, Any]] = (),
    ) -> AsyncIterator[ProviderEvent]:
        raise ProviderError(catalog.unavailable_reason(self.model), kind="unavailable")
        yield  # an async generator that fails at its first step

    async def count_tokens(
        self, messages: list[dict[str, Any]], *, system: str | None = None
    ) -> int:
        raise ProviderError(catalog.unavailable_reason(self.model), kind="unavailable")
