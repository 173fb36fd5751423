"""The items of every entry extracted again: extraction now finds numbers with a scale word
or unit, underscored literals, times, version tags, compiler and runtime error codes and exit
codes, and leaves out more noise (sessions.items). The items are derived from the content,
which never changes, so this only refreshes what was kept."""

from types import SimpleNamespace

from django.db import migrations

from sessions.content import text_of
from sessions.items import entry_items

BATCH = 1_000


def extract_again(apps, schema_editor):
    Entry = apps.get_model("chat", "Entry")
    ids = list(Entry.objects.order_by("id").values_list("id", flat=True))
    fields = ("id", "kind", "role", "status", "custom_type", "content", "data", "items")
    for start in range(0, len(ids), BATCH):
        changed = []
        for entry in Entry.objects.filter(id__in=ids[start : start + BATCH]).only(*fields):
            readable = SimpleNamespace(
                pk=entry.pk, kind=entry.kind, role=entry.role, status=entry.status,
                custom_type=entry.custom_type, content=entry.content, data=entry.data,
                input_tokens=0, output_tokens=0, text=text_of(entry.content),
            )  # fmt: skip
            items = entry_items(readable)
            if items != entry.items:
                entry.items = items
                changed.append(entry)
        Entry.objects.bulk_update(changed, ["items"])


class Migration(migrations.Migration):
    dependencies = [("chat", "0012_session_file_header")]

    operations = [migrations.RunPython(extract_again, migrations.RunPython.noop)]
