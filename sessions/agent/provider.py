"""Which provider a session's model runs on: Claude, the offline model, or one that says why the
model cannot run here. The providers are the network edge; this is where the agent gives them
what they need (the offline model's words, this server's settings)."""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.conf import settings

from ..models import ChatSession, Preferences
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


async def writer_of(session: ChatSession, own: Provider) -> Provider:
    """What writes `session`'s handoff documents and drafts: the model its owner prefers for
    them (Preferences → handoff_writer, to let a cheaper one write them) when this server
    offers it, else `own`, the session's."""
    read = database_sync_to_async(Preferences.of_owner)
    preferred = await read(session, "handoff_writer", "owner_handoff_writer") or ""
    if not preferred or preferred == own.model or not catalog.is_offered(preferred):
        return own
    return provider_for(preferred)
