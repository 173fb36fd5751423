from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from .. import handoff
from ..coverage import Coverage, Item
from ..providers import label_for
from ..rendering import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(render_markdown(text))  # noqa: S308 - sanitised by nh3


@register.filter
def model_label(model: str) -> str:
    return label_for(model)


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
