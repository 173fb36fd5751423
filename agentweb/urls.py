from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from sessions.views import PasswordChange

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/password_change/", PasswordChange.as_view(), name="password_change"),
    path("accounts/", include("django.contrib.auth.urls")),
    # What browsers and feed readers ask for without reading the page's <link rel="icon">.
    path(
        "favicon.ico",
        login_not_required(RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    ),
    path("", include("sessions.urls")),
]
