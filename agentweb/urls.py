from django.contrib import admin
from django.urls import include, path

from sessions.views import PasswordChange

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/password_change/", PasswordChange.as_view(), name="password_change"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("sessions.urls")),
]
