"""Which provider a session's model runs on: Claude, the offline model, or one that says why the
model cannot run here. The providers are the network edge; this is where the agent gives them
what they need (the offline model's words, this server's settings)."""

from __future__ import annotations

from django.conf import settings

from ..offline import OfflineModel
from ..providers import Provider, catalog, claude
from ..providers.local import LocalProvider
from ..providers.unavailable import UnavailableProvider


def provider_for(model: str) -> Provider:
    """The provider for a session's model: `local`, an offered Claude model, or one that
    explains why the model cannot run here."""
    if not catalog.is_offered(model):
        return UnavailableProvider(model)
    spec = catalog.spec(model)
    if model == catalog.LOCAL:
        return LocalProvider(
            OfflineModel(), token_delay=settings.AGENTWEB_LOCAL_TOKEN_DELAY, spec=spec
        )
    return claude(model, max_tokens=spec.max_output, stall_seconds=settings.AGENTWEB_STALL_SECONDS)
