"""The settings the tests run on: agentweb's own, with a fast password hasher first.

Django's default hasher takes about 0.35 s a password here, by design, and the tests make or
sign in a user in most of their set-ups: Django's "Speeding up the tests" advises a faster
hasher for test runs. The defaults stay in the list, after it, so a password hashed by a
process on `agentweb.settings` (a bench's) still checks. Daphne processes the tests start
inherit DJANGO_SETTINGS_MODULE, and so these settings."""

from django.conf import global_settings

from agentweb.settings import *  # noqa: F403

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    *global_settings.PASSWORD_HASHERS,
]
