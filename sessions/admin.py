from django.contrib import admin

from .models import ChatSession, Entry, PendingPrompt, Preferences, PromptTemplate


@admin.register(ChatSession)
class ChatSessionAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "owner", "model", "updated_at", "parent_session"]
    list_filter = ["model"]
    search_fields = ["title"]
    raw_id_fields = ["leaf", "parent_session", "handed_off_from"]


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "kind", "role", "custom_type", "status", "created_at"]
    list_filter = ["kind", "status"]
    raw_id_fields = ["session", "parent"]


admin.site.register(PendingPrompt)
admin.site.register(Preferences)
admin.site.register(PromptTemplate)
