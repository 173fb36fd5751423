"""A model this server does not offer (a Claude model with no key): every call fails with the
reason, in plain words."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from . import catalog
from .base import Provider, ProviderError, ProviderEvent


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
