"""Running it for real: deploy checks, private files, sign-in throttling, password rules."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

from foundation.private import read_or_create

from .servers import ROOT


def test_check_deploy_runs_clean_behind_the_documented_https_proxy(tmp_path):
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DJANGO_DEBUG": "0",
        "DJANGO_HTTPS": "1",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "chat.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://chat.example.com",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_server_process_hands_the_interpreter_lock_to_a_waiting_thread_within_half_a_ms(
    tmp_path,
):
    """A PostgreSQL call on a thread takes the lock back at each round trip (Python waits up to
    5 ms by default); the server's young collections run every 20,000 new objects."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'asgi.sqlite3'}"}
    shown = "import sys, gc; print(sys.getswitchinterval(), gc.get_threshold()[0])"
    result = subprocess.run(
        [sys.executable, "-c", f"import agentweb.asgi; {shown}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0.0005", "20000"]


def _make(path: str) -> str:
    return read_or_create(Path(path), lambda: secrets.token_urlsafe(50))


def test_processes_starting_at_once_agree_on_one_secret_made_private_from_the_start(tmp_path):
    path = tmp_path / ".agentweb-secret"
    with ProcessPoolExecutor(max_workers=6) as pool:
        keys = set(pool.map(_make, [str(path)] * 24))
    assert len(keys) == 1 and path.read_text() == keys.pop()
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [".agentweb-secret"]  # no temporary left


@pytest.mark.parametrize("password", ["password", "12345678901", "owner-owner"])
def test_weak_passwords_are_refused(password):
    from django.contrib.auth.models import User

    with pytest.raises(ValidationError):
        validate_password(password, User(username="owner-owner"))


@pytest.mark.django_db
def test_repeated_failed_sign_ins_are_paused_for_that_user_and_address(client, django_user_model):
    django_user_model.objects.create_user("walker", password="walker-pass-123")
    statuses = [
        client.post("/accounts/login/", {"username": "walker", "password": "wrong"}).status_code
        for _ in range(5)
    ]
    assert statuses == [200, 200, 200, 200, 429]  # the fifth failure pauses it
    locked = client.post("/accounts/login/", {"username": "walker", "password": "walker-pass-123"})
    assert locked.status_code == 429
    assert "Too many failed sign-ins" in locked.content.decode()
    assert "is paused for 15 minutes after 5 failed attempts" in locked.content.decode()
    assert '<a href="/accounts/login/">Back to sign in</a>' in locked.content.decode()
    other = client.post(
        "/accounts/login/",
        {"username": "walker", "password": "walker-pass-123"},
        REMOTE_ADDR="10.0.0.9",
    )
    assert other.status_code == 302  # the same user from another address is not locked out


def sign_in(client, password: str, forwarded_for: str):
    return client.post(
        "/accounts/login/",
        {"username": "walker", "password": password},
        REMOTE_ADDR="10.0.0.1",  # the reverse proxy every request comes through
        HTTP_X_FORWARDED_FOR=forwarded_for,
    )


@pytest.mark.django_db
def test_behind_a_trusted_proxy_failures_count_by_the_clients_own_address(
    client, django_user_model, settings
):
    settings.AGENTWEB_TRUSTED_PROXIES = 1
    django_user_model.objects.create_user("walker", password="walker-pass-123")
    for _ in range(5):  # someone else, behind the same proxy, fails five times
        sign_in(client, "wrong", "198.51.100.7")
    assert sign_in(client, "walker-pass-123", "198.51.100.7").status_code == 429
    owner = sign_in(client, "walker-pass-123", "203.0.113.20")  # from the owner's own address
    assert owner.status_code == 302


@pytest.mark.django_db
def test_an_address_written_by_the_client_before_the_proxys_is_not_believed(
    client, django_user_model, settings
):
    settings.AGENTWEB_TRUSTED_PROXIES = 1
    django_user_model.objects.create_user("walker", password="walker-pass-123")
    for n in range(5):  # a new made-up address each time, and the proxy's entry after it
        sign_in(client, "wrong", f"192.0.2.{n}, 198.51.100.7")
    assert sign_in(client, "walker-pass-123", "192.0.2.99, 198.51.100.7").status_code == 429
    assert sign_in(client, "walker-pass-123", "203.0.113.20").status_code == 302


@pytest.mark.django_db
def test_without_a_trusted_proxy_the_forwarding_header_is_ignored(
    client, django_user_model, settings
):
    settings.AGENTWEB_TRUSTED_PROXIES = 0
    django_user_model.objects.create_user("walker", password="walker-pass-123")
    for n in range(5):
        sign_in(client, "wrong", f"192.0.2.{n}")
    assert sign_in(client, "walker-pass-123", "203.0.113.20").status_code == 429


@pytest.mark.parametrize(
    ("chosen", "backend"),
    [
        ("", "foundation.layers.bus.BusChannelLayer"),
        ("pubsub", "channels_redis.pubsub.RedisPubSubChannelLayer"),
        ("queued", "channels_redis.core.RedisChannelLayer"),
    ],
)
def test_with_redis_the_channel_layer_is_the_bus_unless_another_is_asked_for(chosen, backend):
    env = {**os.environ, "REDIS_URL": "redis://127.0.0.1:1/0", "AGENTWEB_CHANNEL_LAYER": chosen}
    shown = subprocess.run(
        [sys.executable, "-c", "from agentweb import settings; "
         "print(settings.CHANNEL_LAYERS['default']['BACKEND'])"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.stdout.strip() == backend, shown.stderr


@pytest.mark.parametrize(
    ("minutes", "said"),
    [(15, "15 minutes"), (1, "1 minute"), (90, "1 hour 30 minutes"), (2 * 24 * 60, "2 days")],
)
def test_a_pause_is_said_in_words(minutes, said):
    from datetime import timedelta

    from sessions.templatetags.agentweb import in_words

    assert in_words(timedelta(minutes=minutes)) == said
