"""Entries get `search_text` (their words), filled for existing entries, and a full-text
index: an FTS5 trigram table kept in step by triggers on SQLite, a GIN index on PostgreSQL."""

from typing import Any

from django.db import migrations, models

SQLITE_INDEX = [
    "CREATE VIRTUAL TABLE chat_entry_fts USING fts5("
    "search_text, content='chat_entry', content_rowid='id', tokenize='trigram')",
    "CREATE TRIGGER chat_entry_fts_insert AFTER INSERT ON chat_entry BEGIN "
    "INSERT INTO chat_entry_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "CREATE TRIGGER chat_entry_fts_delete AFTER DELETE ON chat_entry BEGIN "
    "INSERT INTO chat_entry_fts(chat_entry_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); END",
    "CREATE TRIGGER chat_entry_fts_update AFTER UPDATE OF search_text ON chat_entry BEGIN "
    "INSERT INTO chat_entry_fts(chat_entry_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); "
    "INSERT INTO chat_entry_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "INSERT INTO chat_entry_fts(chat_entry_fts) VALUES ('rebuild')",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS chat_entry_fts_insert",
    "DROP TRIGGER IF EXISTS chat_entry_fts_delete",
    "DROP TRIGGER IF EXISTS chat_entry_fts_update",
    "DROP TABLE IF EXISTS chat_entry_fts",
]
POSTGRES_INDEX = [
    "CREATE INDEX chat_entry_search_words ON chat_entry "
    "USING GIN (to_tsvector('simple'::regconfig, COALESCE(search_text, '')))",
]
POSTGRES_DROP = ["DROP INDEX IF EXISTS chat_entry_search_words"]


def words(content: Any) -> str:
    """The same as sessions.search.searchable, as it was when this migration was written."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict):
            for key in ("text", "thinking"):
                if isinstance(block.get(key), str):
                    parts.append(block[key])
    return "\n".join(parts)


def fill(apps: Any, schema_editor: Any) -> None:
    Entry = apps.get_model("chat", "Entry")
    batch = []
    for entry in Entry.objects.only("pk", "content").iterator(chunk_size=2000):
        entry.search_text = words(entry.content)
        batch.append(entry)
        if len(batch) == 2000:
            Entry.objects.bulk_update(batch, ["search_text"])
            batch = []
    Entry.objects.bulk_update(batch, ["search_text"])


def run(statements: dict[str, list[str]]) -> Any:
    def apply(apps: Any, schema_editor: Any) -> None:
        for statement in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0005_reply_cache_tokens"),
    ]

    operations = [
        migrations.AddField(
            model_name="entry",
            name="search_text",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.RunPython(
            run({"sqlite": SQLITE_INDEX, "postgresql": POSTGRES_INDEX}),
            run({"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}),
        ),
    ]
