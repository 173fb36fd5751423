"""Validation of everything a browser sends: WebSocket frames included."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings

from . import commands, todos
from .attachments import MOST_PER_MESSAGE as MOST_FILES
from .models import Preferences, PromptTemplate
from .numbers import LARGEST, whole_number
from .providers import catalog


class WholeNumberField(forms.Field):
    """A form's whole number, read by `whole_number` (Django's IntegerField takes "٣")."""

    default_error_messages = {"invalid": "Enter a whole number (digits 0–9)."}

    def __init__(self, *, min_value: int = 0, max_value: int = LARGEST, **kwargs: Any) -> None:
        self.min_value, self.max_value = min_value, max_value
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> int | None:
        if value in self.empty_values:
            return None
        number = whole_number(value, largest=self.max_value)
        if number is None or number < self.min_value:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return number


class FrameForm(forms.Form):
    """One WebSocket frame from the page (the htmx ws extension sends form fields as JSON)."""

    action = forms.ChoiceField(
        choices=[
            (a, a)
            for a in (
                "send", "cancel", "handoff_confirm", "handoff_discard", "edit", "regenerate",
                "answer", "continue", "queue_edit", "queue_remove",
            )
        ],
        required=False,
    )  # fmt: skip
    message = forms.CharField(required=False, strip=False)
    attachments = forms.RegexField(  # send: the ids of the files attached, "12,13"
        rf"^\d{{1,18}}(,\d{{1,18}}){{0,{MOST_FILES - 1}}}$", required=False,
        error_messages={"invalid": f"Malformed message: at most {MOST_FILES} attached file ids."},
    )  # fmt: skip
    document = forms.CharField(required=False, strip=False)
    model = forms.CharField(required=False, max_length=100)  # handoff_confirm: the new session's
    entry = WholeNumberField(required=False, min_value=1)
    question = WholeNumberField(required=False, min_value=1)  # answer: the question answered
    answer = forms.ChoiceField(  # answer: the user's button
        choices=[("once", "once"), ("session", "session"), ("deny", "deny")], required=False
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        data["action"] = data.get("action") or "send"
        typing = data["action"] in ("send", "edit", "queue_edit")
        attached = data["action"] == "send" and data.get("attachments")
        if typing and not (data.get("message") or "").strip() and not attached and not self.errors:
            raise forms.ValidationError("Type a message first.")
        naming = data["action"] in ("edit", "regenerate", "continue", "queue_edit", "queue_remove")
        if naming and not data.get("entry") and not self.errors:
            raise forms.ValidationError("Which message? The frame names no entry.")
        answering = data["action"] == "answer"
        if answering and not (data.get("question") and data.get("answer")) and not self.errors:
            raise forms.ValidationError("Which question, and which answer? The frame says not.")
        return data


def _at_most_the_limit(value: str) -> None:
    """A message or document no longer than AGENTWEB_MAX_MESSAGE_CHARS, as set now."""
    limit = settings.AGENTWEB_MAX_MESSAGE_CHARS
    if len(value) > limit:
        raise forms.ValidationError(
            f"Message too long: {len(value):,} characters (the limit is {limit:,})."
        )


class _Shared(dict[str, forms.Field]):
    """A form's fields that no form changes, used by each form as they are: Django deep-copies a
    form's fields for every form it makes, and a frame's form is made for every message a tab
    sends (two thirds of its check's time, `deepcopy` and the label suffix's translation)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _Shared:
        return self


for _name in ("message", "document"):
    FrameForm.base_fields[_name].validators.append(_at_most_the_limit)
FrameForm.base_fields = _Shared(FrameForm.base_fields)


@dataclass(frozen=True)
class Frame:
    action: str
    message: str = ""
    document: str = ""
    entry: int | None = None
    question: int | None = None  # the tool call's question an `answer` frame answers
    answer: str = ""  # once, session or deny
    model: str = ""  # handoff_confirm: the model the new session runs on ("": as offered)
    attachments: tuple[int, ...] = ()  # send: the files attached to the message


class FrameError(ValueError):
    def __init__(self, reason: str, text: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.text = text  # what the user typed, handed back so nothing is lost


def parse_frame(text_data: str | None) -> Frame:
    """Parse and validate one frame, or raise FrameError with a reason a person can read."""
    limit = settings.AGENTWEB_MAX_MESSAGE_CHARS
    if text_data is None:
        raise FrameError("Malformed message: expected a JSON text frame.")
    most = settings.AGENTWEB_MAX_FRAME_BYTES
    if len(text_data) > most or len(text_data.encode("utf-8", "surrogatepass")) > most:
        raise FrameError(f"Message too long: the limit is {limit:,} characters.", _typed(text_data))
    try:
        payload = json.loads(text_data)
    except ValueError:
        raise FrameError("Malformed message: not valid JSON.") from None
    except RecursionError:
        raise FrameError("Malformed message: nested too deeply.") from None
    if not isinstance(payload, dict):
        raise FrameError("Malformed message: expected a JSON object.")
    payload.pop("HEADERS", None)
    if any(not isinstance(v, str | int | type(None)) for v in payload.values()):
        raise FrameError("Malformed message: fields must be strings.")
    payload = {k: storable(v) if isinstance(v, str) else v for k, v in payload.items()}
    form = FrameForm(payload, label_suffix="")  # no label is shown: no translation looked up
    if not form.is_valid():
        typed = payload.get("message") if isinstance(payload.get("message"), str) else ""
        reason = " ".join(str(e) for errors in form.errors.values() for e in errors)
        raise FrameError(reason, typed or "")
    data = form.cleaned_data
    attached = tuple(int(pk) for pk in (data["attachments"] or "").split(",") if pk)
    return Frame(
        data["action"], data["message"], data["document"], data["entry"],
        data["question"], data["answer"], data["model"], attached,
    )  # fmt: skip


def _typed(text_data: str) -> str:
    """The message a frame too large to take holds, to give back (empty: none can be read).
    Daphne hands over no frame past its own limit (1 MiB), so this reads at most that."""
    try:
        payload = json.loads(text_data)
    except (ValueError, RecursionError):
        return ""
    typed = payload.get("message") if isinstance(payload, dict) else None
    return storable(typed) if isinstance(typed, str) else ""


def storable(text: str) -> str:
    """Text a database can keep: NUL and half surrogate pairs (possible as JSON escapes in a
    frame) become U+FFFD."""
    return UNSTORABLE.sub("\ufffd", text)


UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class PreferencesForm(forms.ModelForm):
    class Meta:
        model = Preferences
        fields = [
            "instructions",
            "generate_titles",
            "review_handoff",
            "auto_handoff_at",
            "auto_compacts",
            "draft_handoff_at",
            "handoff_writer",
            "amend_handoff",
            "handoff_instructions",
            "recall_everywhere",
            "propose_handoff",
        ]
        widgets = {
            "handoff_instructions": forms.Textarea(attrs={"rows": 4}),
            "instructions": forms.Textarea(attrs={"rows": 4}),
        }
        labels = {
            "handoff_instructions": "My handoff instructions",
            "instructions": "Custom instructions",
            "generate_titles": "Give new sessions a short title written by Claude",
            "review_handoff": "Review the handoff document before switching sessions",
            "auto_handoff_at": "Hand off automatically at this share of the context window (%)",
            "auto_compacts": "At that share, compact in place instead of handing off",
            "draft_handoff_at": "Prepare the handoff in the background from this share of the "
            "context window (%)",
            "recall_everywhere": "Let the model recall from all my sessions",
            "propose_handoff": "Let the model propose a handoff",
            "amend_handoff": "Ask Claude to work items the document dropped into it "
            "(instead of appending them)",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["draft_handoff_at"].required = False  # left out: as it was
        models = [(model.id, model.label) for model in catalog.offered()]
        kept = self.instance.handoff_writer  # chosen once, perhaps no longer offered: kept
        if kept and kept not in dict(models):
            models.append((kept, f"{catalog.spec(kept).label} (not offered now)"))
        self.fields["handoff_writer"] = forms.ChoiceField(
            label="Write handoff documents and drafts with",
            choices=[("", "Each session's own model"), *models],
            required=False,
        )

    def clean_draft_handoff_at(self) -> int:
        value = self.cleaned_data.get("draft_handoff_at")
        return self.instance.draft_handoff_at if value is None else int(value)


class PromptForm(forms.ModelForm):
    """One of a user's own prompts: `/name` in the message box expands to its text."""

    class Meta:
        model = PromptTemplate
        fields = ["name", "description", "body"]
        labels = {"name": "Name", "description": "Description", "body": "Prompt"}
        widgets = {"body": forms.Textarea(attrs={"rows": 8})}

    def __init__(self, *args: Any, owner_id: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.owner_id = owner_id

    def clean_body(self) -> str:
        body: str = self.cleaned_data["body"]
        limit = settings.AGENTWEB_MAX_TEMPLATE_CHARS
        if len(body) > limit:
            raise forms.ValidationError(
                f"A prompt is at most {limit:,} characters long; this one has {len(body):,}."
            )
        return body

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip().removeprefix("/").lower()
        if not PROMPT_NAME.fullmatch(name):
            raise forms.ValidationError(
                "A name starts with a letter and has letters, digits, - and _ only."
            )
        if name in commands.REGISTRY:
            raise forms.ValidationError(f"/{name} is one of agentweb's own commands.")
        mine = PromptTemplate.objects.filter(owner_id=self.owner_id, name=name)
        if mine.exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError(f"You have a prompt called /{name} already.")
        return name


PROMPT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,49}")


class ModelForm(forms.Form):
    """The session page's model picker: one of the models this server offers."""

    model = forms.ChoiceField()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["model"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(m.id, m.label) for m in catalog.offered()]


class CompareForm(forms.Form):
    """The side-by-side chooser: two session ids."""

    left = WholeNumberField(min_value=1, widget=forms.NumberInput)
    right = WholeNumberField(min_value=1, widget=forms.NumberInput)


class RenameForm(forms.Form):
    title = forms.CharField(max_length=200, strip=True)


class ImportForm(forms.Form):
    file = forms.FileField(label="Session file (JSONL)", allow_empty_file=True)


TODO_OP = re.compile(r"(?:save|add|(?:up|down|remove):[0-9]{1,3})")
TODO_UNREADABLE = "That change to the todo list could not be read: reload the page."


class TodoEditForm:
    """The todo panel's change: the list as the panel shows it (`text` and `state` of each item,
    in order; `done`: the indices ticked), and what to do to it (`op`: save, add `new`, or up,
    down or remove item i)."""

    def __init__(self, data: Any) -> None:
        self.texts: list[str] = data.getlist("text")
        self.states: list[str] = data.getlist("state")
        self.done: list[str] = data.getlist("done")
        self.op: str = data.get("op") or "save"
        self.new: str = " ".join(str(data.get("new", "")).split())
        self._problem = self._check()

    def _check(self) -> str:
        if len(self.texts) != len(self.states) or not TODO_OP.fullmatch(self.op):
            return TODO_UNREADABLE
        if len(self.texts) + (self.op == "add") > todos.MAX_ITEMS:
            return f"A todo list holds at most {todos.MAX_ITEMS} items."
        if any(state not in todos.STATES for state in self.states):
            return TODO_UNREADABLE
        ticked = [whole_number(index, largest=len(self.texts) - 1) for index in self.done]
        if None in ticked:
            return TODO_UNREADABLE
        texts = [*self.texts, self.new]
        if any(len(text) > todos.MAX_TEXT for text in texts):
            return f"A todo item is at most {todos.MAX_TEXT} characters long."
        if self.op == "add" and not self.new:
            return "Write the new item first."
        return ""

    def is_valid(self) -> bool:
        return not self._problem

    def problem(self) -> str:
        return self._problem

    def apply(self) -> tuple[list[todos.Todo], str]:
        """The new list, and the id of the control to focus next."""
        ticked = {whole_number(index) for index in self.done}
        items: list[todos.Todo | None] = []
        for index, (text, state) in enumerate(zip(self.texts, self.states, strict=True)):
            if index in ticked:
                state = "done"
            elif state == "done":
                state = "pending"  # unticked
            text = " ".join(text.split())
            items.append(todos.Todo(text, state) if text else None)
        name, _, number = self.op.partition(":")
        at = int(number) if number else 0
        focus = ""
        if name == "add" or (name == "save" and self.new):  # Enter in the new item's box saves
            items.append(todos.Todo(self.new))
            focus = "todo-new"
        elif name in ("up", "down") and at < len(items):
            to = at - 1 if name == "up" else at + 1
            if 0 <= to < len(items):
                items[at], items[to] = items[to], items[at]
                last = len(items) - 1
                focus = f"todo-{name}-{to}" if 0 < to < last else f"todo-text-{to}"
        elif name == "remove" and at < len(items):
            del items[at]
            focus = f"todo-text-{min(at, len(items) - 1)}" if items else "todo-new"
        return [item for item in items if item is not None], focus
