"""What a person does to a session from its page or the list: care (pin, archive, delete,
restore), branches (switch, fork), settings (title, model, thinking), the todo list. Each
change is shown in every tab of the session."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from .. import care, generation, todos
from ..commands import session as session_commands
from ..forms import ModelForm, TodoEditForm
from ..models import BranchRefused, ChatSession
from ..numbers import entry_id_of
from ..partials import announce
from .base import AuthenticatedRequest, after_setting, own_session, say_refused


@require_POST
def edit_todos(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The user's change to the todo list (tick, edit, add, remove, move), from the panel: the
    whole list, as the panel shows it, and what to do to it."""
    session = own_session(request, session_id)
    change = TodoEditForm(request.POST)
    if not change.is_valid():
        messages.error(request, change.problem())
    elif session.is_generating:
        messages.error(request, todos.BUSY)
    else:
        todo_list, focus = change.apply()
        if todo_list != todos.state(session).todos:  # a change that changes nothing is not kept
            todos.append_list(session, todo_list, "user")
        announce.todos(session, todo_list, focus=focus)
    return after_setting(request, session)


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
    session = own_session(request, session_id)
    count = 1
    if action in ("pin", "unpin"):
        session.set_pinned(action == "pin")
    elif action in ("archive", "unarchive"):
        session.set_archived(action == "archive")
    else:
        deleted_ids = session.soft_delete(whole_chain=action == "delete_chain")
        count = len(deleted_ids)
        announce.deleted(deleted_ids)
        generation.stop(deleted_ids)
    messages.success(request, CARE_DONE[action].format(session.display_title, count=count))
    announce.sidebar(request.user)
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
    announce.sidebar(request.user)
    more = f" and {count - 1} more session{'s' if count > 2 else ''}" if count > 1 else ""
    messages.success(request, f"Restored “{restored.display_title}”{more}.")
    return redirect(restored if request.POST.get("back") == "session" else "chat:index")


@require_POST
def switch_branch(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The branch switcher and the tree view: the session goes on from the branch through the
    entry (every tab shows it); without htmx, the page shows that entry."""
    session = own_session(request, session_id)
    entry_id = entry_id_of(request.POST.get("entry"))
    try:
        session.switch_branch(entry_id)
    except BranchRefused as refusal:
        return say_refused(request, session, str(refusal))
    announce.branch(session.pk)
    if request.htmx:
        return HttpResponse(status=204)
    return redirect(session.url_at(entry_id))


@require_POST
def fork(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """A new session from the branch up to an entry (the reference agent's /branch)."""
    session = own_session(request, session_id)
    try:
        forked = session.fork(entry_id_of(request.POST.get("entry")))
    except BranchRefused as refusal:
        return say_refused(request, session, str(refusal))
    messages.success(request, f"Forked from {session.display_title} (#{session.pk}).")
    announce.sidebar(request.user)
    if request.htmx:
        return HttpResponse(status=204, headers={"HX-Redirect": forked.get_absolute_url()})
    return redirect(forked)


@require_POST
def rename(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The session menu's Rename: its title, in every tab (and every tab's sidebar)."""
    session = own_session(request, session_id)
    return _worded(request, session, session.rename(request.POST.get("title", "")), announce.title)


@require_POST
def instructions(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The session menu's Instructions: its own, after its owner's in every request."""
    session = own_session(request, session_id)
    refusal = session.set_instructions(request.POST.get("instructions", ""))
    return _worded(request, session, refusal, announce.instructions)


def _worded(
    request: AuthenticatedRequest,
    session: ChatSession,
    refusal: str,
    shown: Callable[[int], None],
) -> HttpResponse:
    """After a title or instructions were set: the refusal said, or the change shown in every
    tab; back to the session."""
    if refusal:
        messages.error(request, refusal)
    else:
        shown(session.pk)
    return redirect(session)


@require_POST
def change_model(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The model picker: a `model_change` entry, shown to every tab of the session."""
    session = own_session(request, session_id)
    form = ModelForm(request.POST)
    if not form.is_valid():
        messages.error(request, "That model is not offered on this server.")
    elif session.is_generating:
        messages.error(request, session_commands.MODEL_BUSY)
    elif form.cleaned_data["model"] != session.model:
        entry = session.change_model(form.cleaned_data["model"])
        announce.entry(session.pk, entry)
    return after_setting(request, session)


@require_POST
def change_thinking(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """The thinking picker: a `thinking_level_change` entry, shown to every tab."""
    session = own_session(request, session_id)
    level = request.POST.get("level", "")
    refusal = session_commands.thinking_refusal(session, level)
    if refusal:
        messages.error(request, refusal)
    elif level != session.thinking_level:
        entry = session.change_thinking(level)
        announce.entry(session.pk, entry)
    return after_setting(request, session)
