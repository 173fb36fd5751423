"""Search ignores accents as well as case (issue 20, item 6).

SQLite: a second FTS5 index of the same words, `unicode61 remove_diacritics 2`, kept in step by
triggers beside the trigram one: "resume" finds "résumé" as a word, while the trigram index
still finds any substring written as it is. (The trigram tokenizer learnt `remove_diacritics`
only in SQLite 3.45; Debian 12 ships 3.40.)

PostgreSQL: the `unaccent` extension, through an IMMUTABLE wrapper so that the words index can
be built on the unaccented text."""

from typing import Any

from django.db import migrations

SQLITE_INDEX = [
    "CREATE VIRTUAL TABLE chat_entry_words USING fts5(search_text, content='chat_entry', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER chat_entry_words_insert AFTER INSERT ON chat_entry BEGIN "
    "INSERT INTO chat_entry_words(rowid, search_text) VALUES (new.id, new.search_text); END",
    "CREATE TRIGGER chat_entry_words_delete AFTER DELETE ON chat_entry BEGIN "
    "INSERT INTO chat_entry_words(chat_entry_words, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); END",
    "CREATE TRIGGER chat_entry_words_update AFTER UPDATE OF search_text ON chat_entry BEGIN "
    "INSERT INTO chat_entry_words(chat_entry_words, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); "
    "INSERT INTO chat_entry_words(rowid, search_text) VALUES (new.id, new.search_text); END",
    "INSERT INTO chat_entry_words(chat_entry_words) VALUES ('rebuild')",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS chat_entry_words_insert",
    "DROP TRIGGER IF EXISTS chat_entry_words_delete",
    "DROP TRIGGER IF EXISTS chat_entry_words_update",
    "DROP TABLE IF EXISTS chat_entry_words",
]
POSTGRES_INDEX = [
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    "CREATE OR REPLACE FUNCTION agentweb_unaccent(text) RETURNS text "
    "LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT "
    "AS $$ SELECT public.unaccent('public.unaccent'::regdictionary, $1) $$",
    "DROP INDEX IF EXISTS chat_entry_search_words",
    "CREATE INDEX chat_entry_search_words ON chat_entry USING GIN "
    "(to_tsvector('simple'::regconfig, COALESCE(agentweb_unaccent(search_text), '')))",
]
POSTGRES_DROP = [
    "DROP INDEX IF EXISTS chat_entry_search_words",
    "CREATE INDEX chat_entry_search_words ON chat_entry "
    "USING GIN (to_tsvector('simple'::regconfig, COALESCE(search_text, '')))",
    "DROP FUNCTION IF EXISTS agentweb_unaccent(text)",
]


def run(statements: dict[str, list[str]]) -> Any:
    def apply(apps: Any, schema_editor: Any) -> None:
        for statement in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0016_session_building"),
    ]

    operations = [
        migrations.RunPython(
            run({"sqlite": SQLITE_INDEX, "postgresql": POSTGRES_INDEX}),
            run({"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}),
        ),
    ]
