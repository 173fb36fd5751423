from django.urls import path

from . import views

app_name = "chat"

urlpatterns = [
    path("", views.index, name="index"),
    path("sessions/new/", views.new_session, name="new"),
    path("sessions/<int:session_id>/", views.session_page, name="session"),
    path("sessions/<int:session_id>/compare/<int:other_id>/", views.compare, name="compare"),
    path("preferences/", views.preferences, name="preferences"),
]
