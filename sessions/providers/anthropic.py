"""Claude through the official SDK's streaming Messages API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import anthropic
import httpx2

from .base import Provider, ProviderError, ProviderEvent, StreamEnd, TextDelta, Usage


class AnthropicProvider(Provider):
    def __init__(
        self,
        *,
        model: str,
        api_key: str | None,
        base_url: str | None,
        max_tokens: int = 8192,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.client_options: dict[str, Any] = {
            "api_key": api_key,
            "base_url": base_url,
            "max_retries": max_retries,
        }

    async def stream(
        self, messages: list[dict[str, Any]], *, system: str | None = None
    ) -> AsyncIterator[ProviderEvent]:
        extra: dict[str, Any] = {"system": system} if system else {}
        stopped = False
        # A client per call: its connections close with the call, cancelled or not.
        client = anthropic.AsyncAnthropic(**self.client_options)
        try:
            async with client.messages.stream(
                model=self.model,
                max_tokens=self.max_tokens,
                messages=cast(Any, messages),
                **extra,
            ) as stream:
                async for event in stream:
                    if event.type == "text" and event.text:
                        yield TextDelta(event.text)
                    elif event.type == "message_stop":
                        stopped = True
                if not stopped:
                    raise ProviderError(
                        "network connection lost: the stream ended before the reply did",
                        kind="network",
                    )
                final = await stream.get_final_message()
        except anthropic.APIStatusError as error:
            raise _status_error(error) from error
        except (anthropic.APIConnectionError, httpx2.TransportError) as error:
            raise ProviderError(f"network connection lost ({error})", kind="network") from error
        except anthropic.AnthropicError as error:
            raise ProviderError(str(error) or type(error).__name__, kind="api") from error
        finally:
            await client.close()
        yield StreamEnd(
            Usage(final.usage.input_tokens, final.usage.output_tokens),
            final.stop_reason or "end_turn",
        )


_REASONS_BY_TYPE = {
    "rate_limit_error": ("rate limited by the API, try again shortly", "rate_limited"),
    "overloaded_error": ("the model is overloaded, try again shortly", "overloaded"),
    "authentication_error": ("authentication failed: check ANTHROPIC_API_KEY", "auth"),
    "permission_error": ("permission denied by the API", "auth"),
}


def _status_error(error: anthropic.APIStatusError) -> ProviderError:
    """Name the real cause: an HTTP status, or the `error` event inside a 200 stream."""
    error_type = error.type or {
        429: "rate_limit_error",
        529: "overloaded_error",
        401: "authentication_error",
    }.get(error.status_code, "")
    reason, kind = _REASONS_BY_TYPE.get(error_type, (None, "api"))
    detail = error.api_message or str(error)
    if reason is None:
        status = f" {error.status_code}" if error.status_code != 200 else ""
        reason = f"API error{status}: {detail}"
    elif error.status_code != 200:
        reason = f"{reason} ({error.status_code})"
    return ProviderError(reason, kind=kind)
