from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from functools import lru_cache
from typing import Any

from django import template
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import get_current_timezone, localtime
from django.utils.translation import get_language

from .. import compaction, handoff, transcript, usage
from ..context import mentioned
from ..coverage import Coverage
from ..models import Entry
from ..providers import label_for
from ..rendering import render_markdown, replace_in_text
from ..salience import Item
from ..search import Snippet
from ..tokens import Usage

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(render_markdown(text))  # noqa: S308 - sanitised by nh3


@register.filter
def shown_blocks(entry: Entry) -> list[dict[str, Any]]:
    """The entry's content as the page shows it (tool work and thinking folded)."""
    return transcript.blocks(entry)


@register.filter
def with_mentions(text: str, entry: Entry) -> SafeString:
    """A person's own message as safe markdown (each line kept), each session it mentions
    (`@#42`) a link named by its title."""
    html = render_markdown(text, breaks=True)
    for session_id, title in mentioned(entry):
        url = reverse("chat:session", args=[session_id])
        link = str(format_html('<a class="mention" href="{}">@{}</a>', url, title))
        html = replace_in_text(html, re.compile(rf"(?<![\w@#])@#{session_id}\b"), _as(link))
    return mark_safe(html)  # noqa: S308 - sanitised by nh3, the links made by format_html


@register.filter
def as_typed(text: str) -> SafeString:
    """A person's own message as safe markdown, each line kept, a mention left as typed
    (`@#42`: a shared page names no other session)."""
    return mark_safe(render_markdown(text, breaks=True))  # noqa: S308 - sanitised by nh3


def _as(replacement: str) -> Callable[[re.Match[str]], str]:
    """A replacement for `re.sub` taken as it is (no group references read in it)."""
    return lambda _: replacement


@register.filter
def marked(snippet: Snippet) -> SafeString:
    """A search result's words around the match, the match marked."""
    return mark_safe(  # noqa: S308 - every part is escaped
        ("…" if snippet.cut_before else "")
        + escape(snippet.before)
        + (f"<mark>{escape(snippet.match)}</mark>" if snippet.match else "")
        + escape(snippet.after)
        + ("…" if snippet.cut_after else "")
    )


@register.filter
def reply_usage(entry: Entry) -> str:
    """A reply's tokens and cost: `1,200 in · 300 out · $0.0081` (cache reads and writes when
    there were any); empty when the model reported none."""
    return usage_line(usage.of_reply(entry))


@register.filter
def usage_line(used: Usage) -> str:
    if not used.tokens:
        return ""
    parts = [f"{used.input:,} in", f"{used.output:,} out"]
    if used.cache_read:
        parts.append(f"{used.cache_read:,} from cache")
    if used.cache_write:
        parts.append(f"{used.cache_write:,} to cache")
    if cost := usage.dollars(used.cost):
        parts.append(cost)
    return " · ".join(parts)


@register.filter
def model_label(model: str) -> str:
    return label_for(model)


@register.filter
def compaction_figures(entry: Entry) -> str:
    return compaction.figures(entry)


@register.filter
def handoff_document(content: str) -> str:
    """The document inside a handoff message's `<handoff-context>` wrapper."""
    return handoff.unwrap(content)


@register.simple_tag
def handoff_closing() -> str:
    return handoff.CLOSING


@register.simple_tag
def last_seen(item: Item, report: Coverage) -> str:
    return item.last_seen(report.total_entries)


@register.filter
def next_in(items: list[Any], index: int) -> Any:
    """The pk of the item after `index` (for links from one session to the next of its chain)."""
    return items[index + 1].pk


@register.filter
def get_item(mapping: dict[Any, Any], key: Any) -> Any:
    return mapping.get(key)


@register.filter
def relative_time(moment: datetime | None) -> SafeString:
    """`3 minutes ago`, as a <time> the page keeps up to date (its full date on hover)."""
    if moment is None:
        return mark_safe("")  # noqa: S308 - empty
    return format_html(
        '<time datetime="{}" title="{}" data-relative>{}</time>',
        moment.isoformat(),
        _full_date(moment.replace(second=0, microsecond=0), get_current_timezone(), get_language()),
        ago((timezone.now() - moment).total_seconds()),
    )


@lru_cache(maxsize=1024)
def _full_date(minute: datetime, zone: tzinfo, language: str) -> str:
    """`4 Dec 2026, 09:41`: the minute in the zone, formatted once (a fifth of an entry's
    render, and a transcript's entries share their minutes). `language`, the active one that
    `date_format` names the month in, is in the key only."""
    return date_format(localtime(minute, zone), "j M Y, H:i")


# The units of a relative time, as app.js counts them (one wording on the server and the page).
UNITS = [("year", 31_536_000), ("month", 2_592_000), ("day", 86_400), ("hour", 3_600)]
UNITS += [("minute", 60)]


def ago(seconds: float) -> str:
    """`now`, `1 minute ago`, `3 days ago`, `1 year ago`: whole units, the largest that fits."""
    if seconds < 45:
        return "now"
    for unit, size in UNITS:
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'' if count == 1 else 's'} ago"
    return "1 minute ago"


@register.filter
def in_words(span: timedelta | None) -> str:
    """A span of time as people say it: "15 minutes", "1 hour 30 minutes", "2 days"."""
    if span is None:
        return ""
    minutes = max(1, round(span.total_seconds() / 60))
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = [(days, "day"), (hours, "hour"), (minutes, "minute")]
    return " ".join(f"{n} {unit}{'' if n == 1 else 's'}" for n, unit in parts if n)
