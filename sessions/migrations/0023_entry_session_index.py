"""An entry's session is found through the index of (session, id) alone.

Django indexed the foreign key by itself too: one index more to write at every append, serving
nothing the (session, id) index does not, and PostgreSQL's planner took it to read a long
session's entries after one, reading every entry of the session and filtering on the id
(bench/many_sessions.py).

Dropped by name on both databases: Django's own AlterField would remake the table on SQLite,
and the search's triggers on it with it.
"""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

INDEX = "chat_entry_session_id_306be66d"


def drop(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


def create(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON chat_entry (session_id)")


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0022_substring_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop, create)],
            state_operations=[
                migrations.AlterField(
                    model_name="entry",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="entries",
                        to="chat.chatsession",
                    ),
                ),
            ],
        ),
    ]
