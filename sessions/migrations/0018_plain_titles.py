"""Titles show no markdown, and a fork's title says it is one (issue 20, item 5): the titles
cut from first messages before this keep their marks ("how **handoff** works"), and forks kept
their source's title. A fork renamed since keeps its name."""

from typing import Any

from django.db import migrations

from sessions.content import fork_title, plain_line


def clean(apps: Any, schema_editor: Any) -> None:
    ChatSession = apps.get_model("chat", "ChatSession")
    sessions = ChatSession.objects.exclude(title="").select_related("forked_from__session")
    changed = []
    for session in sessions.iterator(chunk_size=2000):
        title = plain_line(session.title)[:200] or session.title
        source = session.forked_from.session if session.forked_from_id else None
        if source is not None and session.title == source.title:
            title = fork_title(plain_line(source.title) or source.title)
        if title != session.title:
            session.title = title
            changed.append(session)
    ChatSession.objects.bulk_update(changed, ["title"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0017_search_without_accents"),
    ]

    operations = [migrations.RunPython(clean, migrations.RunPython.noop)]
