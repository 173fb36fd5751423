"""A user's own prompts: the `/name` templates they create, edit and delete themselves."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from ..forms import PromptForm
from ..models import PromptTemplate
from .base import AuthenticatedRequest


def prompts(request: AuthenticatedRequest) -> HttpResponse:
    """The list of the user's prompts, and the form that adds one."""
    form = PromptForm(request.POST or None, owner_id=request.user.pk)
    if request.method == "POST" and form.is_valid():
        form.instance.owner = request.user
        made = form.save()
        messages.success(request, f"Saved /{made.name}.")
        return redirect("chat:prompts")
    context = {"form": form, "prompts": PromptTemplate.of(request.user.pk)}
    return render(request, "sessions/prompts.html", context)


def edit_prompt(request: AuthenticatedRequest, prompt_id: int) -> HttpResponse:
    prompt = get_object_or_404(PromptTemplate, pk=prompt_id, owner=request.user)
    form = PromptForm(request.POST or None, instance=prompt, owner_id=request.user.pk)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved /{prompt.name}.")
        return redirect("chat:prompts")
    return render(request, "sessions/prompt.html", {"form": form, "prompt": prompt})


@require_POST
def delete_prompt(request: AuthenticatedRequest, prompt_id: int) -> HttpResponse:
    prompt = get_object_or_404(PromptTemplate, pk=prompt_id, owner=request.user)
    prompt.delete()
    messages.success(request, f"Deleted /{prompt.name}.")
    return redirect("chat:prompts")
