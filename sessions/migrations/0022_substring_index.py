"""PostgreSQL finds a substring of the entries' words through an index, as SQLite does.

Search matches words through the full-text index and substrings (a word inside Chinese text,
part of a name) with ILIKE over the unaccented text. With nothing to serve the ILIKE, the two
together were answered by reading every entry of every user, newest first, unaccenting each:
180 ms a search behind 134,000 entries, and growing with the whole table. SQLite has had its
trigram index (FTS5, migration 0006) from the start.

A trigram index (`pg_trgm`, a trusted extension of PostgreSQL's contrib, as `unaccent` is) on
the same expression the search compares serves the ILIKE; with the words index the planner
answers both from indexes (1.4 ms). A table with entries is analyzed afterwards: until the
planner has the expression's statistics it keeps the old plan. An empty one (a new install) is
left to autovacuum: analyzed empty, its statistics would plan the prompt path's reads of a
session's entries as scans of a table that has none, until autovacuum analyzed it again (the
usage tally's reads in a load took 57 ms in all, against 12).
"""

from typing import Any

from django.db import migrations

POSTGRES_INDEX = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX IF NOT EXISTS chat_entry_search_substrings ON chat_entry USING GIN "
    "(upper(agentweb_unaccent(search_text)) gin_trgm_ops)",
]
POSTGRES_DROP = ["DROP INDEX IF EXISTS chat_entry_search_substrings"]


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in POSTGRES_INDEX:
        schema_editor.execute(statement)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT 1 FROM chat_entry)")
        (has_entries,) = cursor.fetchone()
    if has_entries:
        schema_editor.execute("ANALYZE chat_entry")


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRES_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0021_entry_roots"),
    ]

    operations = [
        migrations.RunPython(create, drop),
    ]
