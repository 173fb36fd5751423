from django.urls import path

from . import views

app_name = "chat"

urlpatterns = [
    path("", views.index, name="index"),
    path("sessions/new/", views.new_session, name="new"),
    path("sessions/import/", views.import_session, name="import"),
    path("sessions/compare/", views.compare_choice, name="compare_choice"),
    path("sessions/<int:session_id>/", views.session_page, name="session"),
    path("sessions/<int:session_id>/rename/", views.rename, name="rename"),
    path("sessions/<int:session_id>/instructions/", views.instructions, name="instructions"),
    path("sessions/<int:session_id>/model/", views.change_model, name="model"),
    path("sessions/<int:session_id>/thinking/", views.change_thinking, name="thinking"),
    path("sessions/<int:session_id>/branch/", views.switch_branch, name="switch"),
    path("sessions/<int:session_id>/fork/", views.fork, name="fork"),
    path("sessions/<int:session_id>/tree/", views.tree, name="tree"),
    path("sessions/<int:session_id>/map/", views.lineage_map, name="map"),
    path("sessions/<int:session_id>/todos/", views.edit_todos, name="todos"),
    *(
        path(
            f"sessions/<int:session_id>/{action.replace('_', '-')}/",
            views.care_for,
            {"action": action},
            name=action,
        )
        for action in ("pin", "unpin", "archive", "unarchive", "delete", "delete_chain")
    ),
    path("sessions/<int:session_id>/restore/", views.restore, name="restore"),
    path("sessions/<int:session_id>/attach/", views.attach, name="attach"),
    path("files/<int:attachment_id>/<str:name>", views.attachment, name="attachment"),
    path("sessions/<int:session_id>/share/", views.share, name="share"),
    path("share/<str:token>/", views.shared, name="shared"),
    path("share/<str:token>/continue/", views.continue_shared, name="continue_shared"),
    path(
        "share/<str:token>/files/<int:attachment_id>/<str:name>",
        views.shared_file,
        name="shared_file",
    ),
    path("shared-links/<int:link_id>/revoke/", views.revoke_link, name="revoke_link"),
    path("sessions/<int:session_id>/entries/", views.earlier_entries, name="earlier"),
    path(
        "sessions/<int:session_id>/entries/<int:entry_id>/markdown/",
        views.entry_markdown,
        name="entry_markdown",
    ),
    path("sessions/<int:session_id>/export.md", views.export, {"fmt": "md"}, name="export_md"),
    path(
        "sessions/<int:session_id>/export.jsonl",
        views.export,
        {"fmt": "jsonl"},
        name="export_jsonl",
    ),
    path("sessions/<int:session_id>/compare/<int:other_id>/", views.compare, name="compare"),
    path("preferences/", views.preferences, name="preferences"),
    path("account/", views.PasswordChange.as_view(), name="account"),
    path("account/sign-out-others/", views.sign_out_others, name="sign_out_others"),
    path("prompts/", views.prompts, name="prompts"),
    path("tools/", views.tools, name="tools"),
    path("tools/choose/", views.choose_tools, name="choose_tools"),
    path("sessions/<int:session_id>/tools/", views.tools, name="session_tools"),
    path(
        "sessions/<int:session_id>/tools/choose/", views.choose_tools, name="session_choose_tools"
    ),
    path("prompts/<int:prompt_id>/", views.edit_prompt, name="edit_prompt"),
    path("prompts/<int:prompt_id>/delete/", views.delete_prompt, name="delete_prompt"),
]
