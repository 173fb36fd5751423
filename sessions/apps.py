from django.apps import AppConfig


class ChatConfig(AppConfig):
    """The chat sessions app. Its label is "chat": django.contrib.sessions owns "sessions"."""

    name = "sessions"
    label = "chat"
    verbose_name = "Chat sessions"
    default_auto_field = "django.db.models.BigAutoField"
