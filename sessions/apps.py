from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db.backends.signals import connection_created
from django.db.models.signals import post_delete

from .mcp import config as mcp_config
from .tabs import close_sockets_of


class ChatConfig(AppConfig):
    """The chat sessions app. Its label is "chat": django.contrib.sessions owns "sessions"."""

    name = "sessions"
    label = "chat"
    verbose_name = "Chat sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        user_logged_out.connect(_close_sockets, dispatch_uid="agentweb-close-sockets")
        connection_created.connect(_sqlite_functions, dispatch_uid="agentweb-sqlite-functions")
        attachment = self.get_model("Attachment")
        post_delete.connect(_file_gone, sender=attachment, dispatch_uid="agentweb-file-gone")
        mcp_config.load(settings.AGENTWEB_MCP_SERVERS)  # a bad file stops start-up, in words


def _sqlite_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    """SQLite's `agentweb_fold(text)`: the text without accents, case-folded, as search compares
    it (PostgreSQL has `agentweb_unaccent`, migration 0017)."""
    if connection.vendor == "sqlite":
        from .search import fold_sql

        connection.connection.create_function("agentweb_fold", 1, fold_sql, deterministic=True)


def _file_gone(sender: Any, instance: Any, **kwargs: Any) -> None:
    """An attachment's row deleted (its session purged, its owner deleted): its file too."""
    from django.core.files.storage import storages

    storages["attachments"].delete(instance.path)


def _close_sockets(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """Signing out closes the WebSockets that sign-in opened (their pages stop updating)."""
    if user is not None:
        close_sockets_of(user.pk, request.session.session_key or "")
