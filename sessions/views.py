"""Thin views: look up the user's own session, hand the template what it shows."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from django_htmx.middleware import HtmxDetails

from . import (
    care,
    commands,
    coverage,
    handoff,
    listing,
    partials,
    runtime,
    search,
    session_file,
    store,
    todos,
    transcript,
)
from .forms import (
    CompareForm,
    ImportForm,
    ModelForm,
    PreferencesForm,
    RenameForm,
    TodoEditForm,
)
from .models import ChatSession, Entry, Preferences
from .providers import catalog


class AuthenticatedRequest(HttpRequest):
    """Every view here sits behind LoginRequiredMiddleware (and django-htmx's middleware)."""

    user: User
    htmx: HtmxDetails


def _own_session(request: AuthenticatedRequest, session_id: int) -> ChatSession:
    return get_object_or_404(
        ChatSession.objects.select_related("parent_session", "forked_from__session").filter(
            ChatSession.kept()
        ),
        pk=session_id,
        owner=request.user,
    )


def index(request: AuthenticatedRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()[:200]
    archived = request.GET.get("archived") == "1" and not query
    care.purge(request.user)
    page, chains = listing.chain_page(
        request.user, query, request.GET.get("page"), archived=archived
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
    session = store.new_session(request.user, model=catalog.default_model())
    return redirect(session)


def _end_around(outline: list[tuple[int, str]], at: str) -> int:
    """Where a window showing entry `at` ends: the end, unless the entry is older than the
    latest window; then half a window past it."""
    ids = [pk for pk, _ in outline]
    index = ids.index(int(at)) if at.isdigit() and int(at) in ids else len(ids)
    if index >= len(ids) - transcript.WINDOW:
        return len(ids)
    return min(len(ids), index + transcript.WINDOW // 2)


def session_page(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The session's latest entries; with `?at=<entry id>` (a search result), the entries
    around that one, however old."""
    session = _own_session(request, session_id)
    outline = store.branch_outline(session)
    after = outline[-1][0] if outline else 0
    end = _end_around(outline, request.GET.get("at", ""))
    before = outline[end][0] if end < len(outline) else None
    context = {
        **partials.status_context(session, **runtime.status_state(session)),
        **transcript.window(outline, before),
        "newer_hidden": len(outline) - end,
        "children": list(session.children.order_by("created_at")),
        "forks": list(ChatSession.objects.filter(forked_from__session=session).order_by("pk")),
        "commands": commands.REGISTRY.values(),
        "ws_url": f"/ws/sessions/{session.pk}/?after={after}",
        "live_text": None,
        "rename_form": RenameForm(initial={"title": session.title}),
    }
    todo_list = todos.state(session, branch=(pk for pk, _ in outline)).todos
    context.update(todo_list=todo_list, todo_summary=partials.todo_summary(todo_list))
    context["off_branch"] = _off_branch(session, outline, request.GET.get("at", ""))
    return render(request, "sessions/session.html", context)


def _off_branch(session: ChatSession, outline: store.Outline, at: str) -> int | None:
    """Entry `at` (a search result) when it is in the session but not on the branch shown."""
    if not at.isdigit() or any(pk == int(at) for pk, _ in outline):
        return None
    found = Entry.objects.filter(session=session, pk=int(at)).exists()
    return int(at) if found else None


@require_POST
def edit_todos(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The user's change to the todo list (tick, edit, add, remove, move), from the panel: the
    whole list, as the panel shows it, and what to do to it."""
    session = _own_session(request, session_id)
    change = TodoEditForm(request.POST)
    if not change.is_valid():
        messages.error(request, change.problem())
    elif session.is_generating:
        messages.error(request, todos.BUSY)
    else:
        todo_list, focus = change.apply()
        if todo_list != todos.state(session).todos:  # a change that changes nothing is not kept
            store.append_todos(session, todo_list, "user")
        runtime.announce(session.pk, partials.todo_panel(session, todo_list, focus=focus))
    return _after_setting(request, session)


def earlier_entries(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The window of entries before `?before=<entry id>`, for "Show earlier messages"."""
    session = _own_session(request, session_id)
    try:
        before = int(request.GET.get("before", ""))
    except ValueError:
        before = None
    context = {
        "session": session,
        "with_entries": True,
        **transcript.window(store.branch_outline(session), before),
    }
    return render(request, "sessions/session.html#earlier", context)


CARE_DONE = {
    "pin": "Pinned “{}” to the top of the list.",
    "unpin": "Unpinned “{}”.",
    "archive": "Archived “{}”: it is out of the list, and search still finds it.",
    "unarchive": "“{}” is back in the list.",
    "delete": "Deleted “{}”. You can undo it under Recently deleted.",
    "delete_chain": "Deleted the {count} sessions of “{}”. You can undo it under Recently deleted.",
}


@require_POST
def care_for(request: AuthenticatedRequest, session_id: int, action: str) -> HttpResponse:
    """Pin, archive or delete a session (or delete its chain), then back to where it was asked."""
    session = _own_session(request, session_id)
    count = 1
    if action in ("pin", "unpin"):
        care.set_pinned(session, action == "pin")
    elif action in ("archive", "unarchive"):
        care.set_archived(session, action == "archive")
    else:
        count = care.delete(session, whole_chain=action == "delete_chain")
    messages.success(request, CARE_DONE[action].format(session.display_title, count=count))
    back = request.POST.get("next", "")
    deleted = action.startswith("delete")
    if deleted or not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        return redirect("chat:index")
    return redirect(back)


@require_POST
def restore(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """Undo a delete: the session, and those deleted with it, come back."""
    care.purge(request.user)  # past its undo time, a session is gone
    restored = get_object_or_404(ChatSession, pk=session_id, owner=request.user)
    count = care.restore(request.user, session_id)
    if not count:
        messages.info(request, f"“{restored.display_title}” is not deleted.")
        return redirect("chat:index")
    more = f" and {count - 1} more session{'s' if count > 2 else ''}" if count > 1 else ""
    messages.success(request, f"Restored “{restored.display_title}”{more}.")
    return redirect("chat:index")


def _entry_id(value: str | None) -> int:
    return int(value) if value and value.isdigit() and len(value) < 19 else 0


def _refused(request: AuthenticatedRequest, session: ChatSession, reason: str) -> HttpResponse:
    """A branch action that could not be done: said where the person is looking."""
    if request.htmx:
        return HttpResponse(partials.notice(reason, "error"))  # swapped out of band
    messages.error(request, reason)
    return redirect(session)


@require_POST
def switch_branch(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The branch switcher and the tree view: the session goes on from the branch through the
    entry (every tab shows it); without htmx, the page shows that entry."""
    session = _own_session(request, session_id)
    entry_id = _entry_id(request.POST.get("entry"))
    try:
        store.switch_branch(session, entry_id)
    except store.BranchRefused as refused:
        return _refused(request, session, str(refused))
    runtime.announce_branch(session.pk)
    if request.htmx:
        return HttpResponse(status=204)
    return redirect(f"{session.get_absolute_url()}?at={entry_id}#entry-{entry_id}")


@require_POST
def fork(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """A new session from the branch up to an entry (the reference agent's /branch)."""
    session = _own_session(request, session_id)
    try:
        forked = store.fork(session, _entry_id(request.POST.get("entry")))
    except store.BranchRefused as refused:
        return _refused(request, session, str(refused))
    messages.success(request, f"Forked from {session.display_title} (#{session.pk}).")
    if request.htmx:
        return HttpResponse(status=204, headers={"HX-Redirect": forked.get_absolute_url()})
    return redirect(forked)


def tree(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """Every branch of the session (the reference agent's /tree): any entry is a jump away."""
    session = _own_session(request, session_id)
    return render(request, "sessions/tree.html", {"session": session, "rows": store.tree(session)})


@require_POST
def rename(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    session = _own_session(request, session_id)
    refusal = store.rename(session, request.POST.get("title", ""))
    if refusal:
        messages.error(request, refusal)
    else:
        runtime.announce(session.pk, partials.title(session))
    return redirect(session)


@require_POST
def change_model(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The model picker: a `model_change` entry, shown to every tab of the session."""
    session = _own_session(request, session_id)
    form = ModelForm(request.POST)
    if not form.is_valid():
        messages.error(request, "That model is not offered on this server.")
    elif session.is_generating:
        messages.error(request, runtime.MODEL_BUSY)
    elif form.cleaned_data["model"] != session.model:
        entry = store.change_model(session, form.cleaned_data["model"])
        runtime.announce_entry(session.pk, entry)
    return _after_setting(request, session)


@require_POST
def change_thinking(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The thinking picker: a `thinking_level_change` entry, shown to every tab."""
    session = _own_session(request, session_id)
    level = request.POST.get("level", "")
    refusal = runtime.thinking_refusal(session, level)
    if refusal:
        messages.error(request, refusal)
    elif level != session.thinking_level:
        entry = store.change_thinking(session, level)
        runtime.announce_entry(session.pk, entry)
    return _after_setting(request, session)


def _after_setting(request: AuthenticatedRequest, session: ChatSession) -> HttpResponse:
    """A picker's answer: nothing (every tab sees the change) or the error, in place."""
    if request.htmx:
        response = HttpResponse(status=204)
        for message in messages.get_messages(request):
            response = HttpResponse(partials.notice(str(message), "error"), status=200)
        return response
    return redirect(session)


def export(request: AuthenticatedRequest, session_id: int, fmt: str) -> HttpResponseBase:
    session = _own_session(request, session_id)
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
    return redirect(session)


def compare(request: AuthenticatedRequest, session_id: int, other_id: int) -> HttpResponse:
    """Two sessions of one chain side by side, the older on the left (SPEC B5)."""
    first, second = _own_session(request, session_id), _own_session(request, other_id)
    old, new = sorted([first, second], key=lambda s: (s.created_at, s.pk))
    chain = listing.chain_of(old)
    old_outline, new_outline = store.branch_outline(old), store.branch_outline(new)
    opening = store.entries_by_id([pk for pk, _ in new_outline[:1]])
    seed = opening[0] if opening and opening[0].is_handoff else None
    document_entry_id = listing.handed_off_from(old, new, chain)
    report = _coverage_report(old, seed) if seed is not None else None
    busy = report if isinstance(report, str) else ""
    return render(
        request,
        "sessions/compare.html",
        {
            "old": old,
            "new": new,
            "columns": [
                _column("old", old, old_outline, document_entry_id),
                _column("new", new, new_outline, seed.pk if seed else None),
            ],
            "chain": chain,
            "same_chain": old.chain_id == new.chain_id,
            "coverage": None if busy else report,
            "coverage_busy": busy,
        },
    )


AFTER_FOCUS = 20  # entries shown after the one a compare column is about


def _column(
    side: str, session: ChatSession, outline: list[tuple[int, str]], focus: int | None
) -> dict[str, Any]:
    """One column of side by side: a window of the transcript around its focus (the handoff
    document, or the seed), with the earlier entries on demand and a link for the later ones.
    Only the window's entries are loaded."""
    size = len(outline)
    at = next((i for i, (pk, _) in enumerate(outline) if pk == focus), size - 1)
    start = max(0, min(at - (transcript.WINDOW - AFTER_FOCUS), size - transcript.WINDOW))
    start = transcript.start_of_window([role for _, role in outline], start)
    end = min(size, start + transcript.WINDOW, max(at + AFTER_FOCUS + 1, transcript.WINDOW))
    shown = store.entries_by_id([pk for pk, _ in outline[start:end]])
    return {
        "side": side,
        "session": session,
        "entries": transcript.fold(shown),
        "focus": focus,
        "earlier": start,
        "earlier_before": shown[0].pk if shown else 0,
        "later": size - end,
    }


def _coverage_report(old: ChatSession, seed: Entry) -> coverage.Coverage | str:
    """The coverage report, computed once per old branch and seed (the only time the whole old
    branch is loaded): a request that finds another computing it says so instead of repeating
    the work."""
    key = f"coverage:{old.pk}:{old.leaf_id}:{seed.pk}"
    report: coverage.Coverage | None = cache.get(key)
    if report is not None:
        return report
    if not cache.add(f"{key}:busy", True, timeout=300):
        return "The coverage of this handoff is being worked out: reload in a moment."
    try:
        report = coverage.coverage(store.get_branch(old), handoff.unwrap(seed.text), old.cwd)
        cache.set(key, report, timeout=3600)
    finally:
        cache.delete(f"{key}:busy")
    return report


def compare_choice(request: AuthenticatedRequest) -> HttpResponse:
    """The chooser's GET form: any two sessions of a chain."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        messages.error(request, "Choose two sessions to compare.")
        return redirect("chat:index")
    return redirect("chat:compare", form.cleaned_data["left"], form.cleaned_data["right"])


def preferences(request: AuthenticatedRequest) -> HttpResponse:
    prefs, _ = Preferences.objects.get_or_create(user=request.user)
    form = PreferencesForm(request.POST or None, instance=prefs)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Preferences saved.")
        return redirect("chat:preferences")
    context = {"form": form, "title_model": settings.AGENTWEB_TITLE_MODEL}
    return render(request, "sessions/preferences.html", context)
