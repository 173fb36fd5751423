"""The pages: the session list (with search and import), a session, its earlier entries and
its tree, an export, the preferences."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from .. import (
    attached,
    care,
    commands,
    handoff_review,
    lineage,
    listing,
    mentions,
    partials,
    search,
    session_file,
    sharing,
    status,
    store,
    todos,
    transcript,
)
from ..content import block_list, block_texts
from ..forms import ImportForm, PreferencesForm, RenameForm
from ..mcp import prompts as mcp_prompts
from ..models import ChatSession, Entry, Preferences, PromptTemplate, ToolQuestion
from ..numbers import entry_id_of, whole_number
from ..partials import announce
from ..providers import catalog
from .base import AuthenticatedRequest, own_session


def index(request: AuthenticatedRequest) -> HttpResponse:
    query = search.query_of(request.GET.get("q", ""))
    archived = request.GET.get("archived") == "1" and not query
    care.purge(request.user)
    page, chains = listing.chain_page(
        request.user, query, whole_number(request.GET.get("page")) or 1, archived=archived
    )
    hits = search.find(request.user, query) if query else []
    return render(
        request,
        "sessions/index.html",
        {
            "page": page,
            "chains": chains,
            "query": query,
            "archived": archived,
            "archived_count": ChatSession.objects.filter(
                ChatSession.kept(), owner=request.user, archived_at__isnull=False
            ).count(),
            "deleted": care.recently_deleted(request.user),
            "hits": hits,
            "default_model": catalog.default_model(),
            "import_form": ImportForm(),
        },
    )


@require_POST
def new_session(request: AuthenticatedRequest) -> HttpResponse:
    session = ChatSession.objects.create(owner=request.user, model=catalog.default_model())
    return redirect(session)


def _end_around(outline: list[tuple[int, str]], at: str) -> int:
    """Where a window showing entry `at` ends: the end, unless the entry is older than the
    latest window; then half a window past it."""
    ids = [pk for pk, _ in outline]
    entry_id = entry_id_of(at)
    index = ids.index(entry_id) if entry_id in ids else len(ids)
    if index >= len(ids) - transcript.WINDOW:
        return len(ids)
    return min(len(ids), index + transcript.WINDOW // 2)


def session_page(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The session's latest entries; with `?at=<entry id>` (a search result), the entries
    around that one, however old. A session of yours deleted a moment ago offers its undo."""
    if deleted := care.deleted_one(request.user, session_id):
        return render(request, "sessions/deleted.html", {"deleted": deleted}, status=404)
    session = own_session(request, session_id)
    outline = store.branch_outline(session)
    after = outline[-1][0] if outline else 0
    end = _end_around(outline, request.GET.get("at", ""))
    before = outline[end][0] if end < len(outline) else None
    context = {
        **partials.status_context(session, status.read(session)),
        **transcript.window(outline, before),
        "share": sharing.current(session),
        "newer_hidden": len(outline) - end,
        "children": list(session.children.order_by("created_at")),
        "forks": list(ChatSession.objects.filter(forked_from__session=session).order_by("pk")),
        "commands": commands.REGISTRY.values(),
        "handoff_models": [m for m in catalog.offered() if m.id != session.model],
        "prompts": PromptTemplate.of(request.user.pk),
        "mcp_prompts": mcp_prompts.menu(),
        "mention_menu": mentions.menu(request.user, session),
        "ws_url": f"/ws/sessions/{session.pk}/?after={after}",
        "max_message_chars": settings.AGENTWEB_MAX_MESSAGE_CHARS,
        "max_attachment_bytes": settings.AGENTWEB_MAX_ATTACHMENT_BYTES,
        "live_text": None,
        "rename_form": RenameForm(initial={"title": session.title}),
        "questions": ToolQuestion.open_in(session.pk, session.generation_id),
        "focus_composer": not outline,  # a new session: the message box, not the page
        "welcome": not outline,
        "instructions": Preferences.of_owner(session, "instructions", "owner_instructions") or "",
    }
    todo_list = todos.state(session, branch=(pk for pk, _ in outline)).todos
    context.update(todo_list=todo_list, todo_summary=partials.todo_summary(todo_list))
    context["off_branch"] = _off_branch(session, outline, request.GET.get("at", ""))
    context["sidebar_groups"] = listing.sidebar_groups(listing.recent_chains(request.user, session))
    if waiting := handoff_review.pending(session):  # a reload shows the review it waits on
        context.update(
            reply=waiting.reply,
            document=waiting.document,
            review_models=handoff_review.models_offered(waiting.model),
        )
    return render(request, "sessions/session.html", context)


def _off_branch(session: ChatSession, outline: store.Outline, at: str) -> int | None:
    """Entry `at` (a search result) when it is in the session but not on the branch shown."""
    entry_id = entry_id_of(at)
    if not entry_id or any(pk == entry_id for pk, _ in outline):
        return None
    return entry_id if Entry.objects.filter(session=session, pk=entry_id).exists() else None


def entry_markdown(request: AuthenticatedRequest, session_id: int, entry_id: int) -> HttpResponse:
    """A message's markdown as it was written (its text blocks), for its Copy button: the page
    shows it rendered and does not carry it twice."""
    session = own_session(request, session_id)
    entry = get_object_or_404(Entry, pk=entry_id, session=session)
    words = [block for block in block_list(entry.content) if not attached.is_attached(block)]
    text = "\n\n".join(block_texts(words)) if entry.role != "toolResult" else ""
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


def earlier_entries(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The window of entries before `?before=<entry id>`, for "Show earlier messages"."""
    session = own_session(request, session_id)
    before = whole_number(request.GET.get("before"))
    context = {
        "session": session,
        "with_entries": True,
        **transcript.window(store.branch_outline(session), before),
    }
    return render(request, "sessions/session.html#earlier", context)


def tree(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """Every branch of the session (the reference agent's /tree), TREE_PAGE rows a page: the
    page of the current entry unless `?page=` names another. Any entry is a jump away."""
    session = own_session(request, session_id)
    rows = store.tree(session)
    pages = FromTheEnd(rows, TREE_PAGE)
    asked = whole_number(request.GET.get("page"))
    leaf = next((i for i, row in enumerate(rows) if row.is_leaf), 0)
    current = pages.num_pages - (len(rows) - 1 - leaf) // TREE_PAGE if rows else 1
    page = pages.get_page(asked or current)
    context = {"session": session, "rows": page.object_list, "page": page, "current": current}
    return render(request, "sessions/tree.html", context)


TREE_PAGE = 500


class FromTheEnd(Paginator):
    """Pages numbered from the oldest rows but cut from the newest: the last page, where a
    long session's current entry usually is, is full, and the first takes what is left."""

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        top = self.count - (self.num_pages - number) * self.per_page
        return EndPage(self.object_list[max(0, top - self.per_page) : top], number, self, top)


class EndPage(Page):
    """A page of `FromTheEnd`: its rows end at row `top` (counted from 1)."""

    def __init__(self, rows: Any, number: int, paginator: Paginator, top: int) -> None:
        super().__init__(rows, number, paginator)
        self.top = top

    def start_index(self) -> int:
        return self.top - len(self.object_list) + 1 if self.top else 0

    def end_index(self) -> int:
        return self.top


def lineage_map(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The sessions joined to this one by handoffs and forks, top-down (issue 19, item 6)."""
    session = own_session(request, session_id)
    context = {"session": session, "rows": lineage.map_of(session)}
    return render(request, "sessions/map.html", context)


def export(request: AuthenticatedRequest, session_id: int, fmt: str) -> HttpResponseBase:
    session = own_session(request, session_id)
    filename = f"agentweb-session-{session.pk}.{fmt}"
    response: HttpResponseBase
    if fmt == "md":
        response = HttpResponse(session_file.export_markdown(session), content_type="text/markdown")
    else:
        response = StreamingHttpResponse(
            session_file.export_jsonl(session), content_type="application/x-ndjson"
        )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_POST
def import_session(request: AuthenticatedRequest) -> HttpResponse:
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return redirect("chat:index")
    upload = form.cleaned_data["file"]
    try:
        lines = session_file.read_lines(upload, upload.size)
        session = session_file.import_jsonl(request.user, lines)
    except session_file.InvalidSessionFile as error:
        messages.error(request, f"Could not import {upload.name}: {error}")
        return redirect("chat:index")
    messages.success(request, f"Imported {upload.name}.")
    announce.sidebar(request.user)
    return redirect(session)


def preferences(request: AuthenticatedRequest) -> HttpResponse:
    prefs, _ = Preferences.objects.get_or_create(user=request.user)
    form = PreferencesForm(request.POST or None, instance=prefs)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Preferences saved.")
        return redirect("chat:preferences")
    context = {
        "form": form,
        "title_model": settings.AGENTWEB_TITLE_MODEL,
        "claude": catalog.has_key(),
        "share_links": sharing.of_owner(request.user.pk),
    }
    return render(request, "sessions/preferences.html", context)
