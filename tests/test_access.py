"""Who may open what: the WebSocket's origin check, and closing sockets at sign-out."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator

from .conftest import _cookie_for, db_async, make_session

pytestmark = pytest.mark.django_db(transaction=True)


async def connect(
    owner, session, origin: bytes | None, host: bytes = b"localhost", scheme: str = "ws"
):
    from agentweb.asgi import application

    headers = [(b"cookie", f"sessionid={await _cookie_for(owner)}".encode()), (b"host", host)]
    if origin is not None:
        headers.append((b"origin", origin))
    communicator = WebsocketCommunicator(
        application, f"/ws/sessions/{session.pk}/", headers=headers
    )
    communicator.scope["scheme"] = scheme
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    return connected


@pytest.mark.parametrize(
    "origin",
    [
        b"http://localhost:3000",  # another port
        b"https://localhost:9999",
        b"https://localhost",  # another scheme
        b"http://evil.example",  # another host
        b"null",
        b"",
    ],
)
@pytest.mark.asyncio
async def test_a_page_of_another_origin_cannot_open_the_socket(owner, origin):
    session = await db_async(make_session)(owner, exchanges=1)
    assert not await connect(owner, session, origin)


@pytest.mark.asyncio
async def test_a_socket_without_an_origin_is_refused(owner):
    session = await db_async(make_session)(owner, exchanges=1)
    assert not await connect(owner, session, None)


@pytest.mark.asyncio
async def test_the_sites_own_origin_opens_it_with_its_port_and_scheme(owner, settings):
    settings.ALLOWED_HOSTS = ["localhost", "chat.example.com"]
    session = await db_async(make_session)(owner, exchanges=1)
    assert await connect(owner, session, b"http://localhost")
    assert await connect(owner, session, b"http://localhost:8000", host=b"localhost:8000")
    assert await connect(
        owner, session, b"https://chat.example.com", host=b"chat.example.com", scheme="wss"
    )
    assert not await connect(
        owner, session, b"http://chat.example.com", host=b"chat.example.com", scheme="wss"
    )


@pytest.mark.asyncio
async def test_a_host_outside_allowed_hosts_is_refused_even_from_its_own_origin(owner, settings):
    settings.ALLOWED_HOSTS = ["localhost"]
    session = await db_async(make_session)(owner, exchanges=1)
    assert not await connect(owner, session, b"http://attacker.example", host=b"attacker.example")


@pytest.mark.asyncio
async def test_behind_a_tls_proxy_the_trusted_origin_is_allowed(owner, settings):
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com", "https://*.corp.example"]
    session = await db_async(make_session)(owner, exchanges=1)
    # The proxy speaks plain ws to daphne; the browser's page is https.
    assert await connect(owner, session, b"https://chat.example.com", host=b"chat.example.com")
    assert await connect(owner, session, b"https://team.corp.example", host=b"chat.example.com")
    assert not await connect(owner, session, b"https://corp.example.evil", host=b"chat.example.com")
    assert not await connect(owner, session, b"http://team.corp.example", host=b"chat.example.com")


@pytest.mark.parametrize(
    "path",
    [
        "/ws/sessions/-1/",
        "/ws/sessions/abc/",
        "/ws/",
        "/ws/anything/else",
        "/not-ws/",
    ],
)
@pytest.mark.parametrize("signed_in", [True, False])
@pytest.mark.asyncio
async def test_a_socket_for_no_session_is_closed_as_not_found_and_logs_nothing(
    owner, path, signed_in, caplog
):
    from agentweb.asgi import application

    headers = [(b"host", b"localhost"), (b"origin", b"http://localhost")]
    if signed_in:
        headers.append((b"cookie", f"sessionid={await _cookie_for(owner)}".encode()))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect()
    assert (connected, code) == (False, 4404)
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


@pytest.mark.asyncio
async def test_a_session_id_longer_than_any_is_not_found(owner, caplog):
    session = await db_async(make_session)(owner, exchanges=1)
    headers = [(b"host", b"localhost"), (b"origin", b"http://localhost")]
    headers.append((b"cookie", f"sessionid={await _cookie_for(owner)}".encode()))
    from agentweb.asgi import application

    for path, code in [
        ("/ws/sessions/99999999999999999999/", 4404),
        (f"/ws/sessions/{session.pk + 2**64}/", 4404),
    ]:
        communicator = WebsocketCommunicator(application, path, headers=headers)
        assert await communicator.connect() == (False, code)
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


@pytest.mark.asyncio
async def test_signing_out_closes_the_sockets_of_that_sign_in_and_no_other(owner, open_tab):
    from django.test import Client

    session = await db_async(make_session)(owner, exchanges=1)
    tabs = [(await open_tab(owner, session))[1] for _ in range(2)]  # two browsers signed in
    for tab in tabs:
        await tab.until('id="status"')  # the catch-up ends with the status

    def sign_out(cookie: str) -> int:
        client = Client()
        client.cookies["sessionid"] = cookie
        return client.post("/accounts/logout/").status_code

    assert await db_async(sign_out)(tabs[0].cookie) == 302
    closed = await tabs[0].ws.receive_output(timeout=2)
    assert closed == {"type": "websocket.close", "code": 4401}
    assert await tabs[1].ws.receive_nothing(timeout=0.3)  # the other browser is still signed in


# --- every URL, as a stranger and as another user --------------------------------------------
def chat_urls(session_id: int, other_id: int) -> list[tuple[str, str]]:
    """(method, url) for every route of the app, aimed at the given sessions."""
    from django.urls import reverse

    from sessions import urls

    found = []
    for pattern in urls.urlpatterns:
        names = set(pattern.pattern.converters)
        kwargs = {name: session_id if name == "session_id" else other_id for name in names}
        url = reverse(f"chat:{pattern.name}", kwargs=kwargs)
        found.append(("post" if pattern.name in POST_ONLY else "get", url))
    assert len(found) == len(urls.urlpatterns) >= 24
    return found


POST_ONLY = {
    "new", "import", "rename", "model", "thinking", "switch", "fork", "pin", "unpin", "archive", "unarchive",
    "delete", "delete_chain", "restore", "todos", "instructions", "sign_out_others", "attach", "share",
    "revoke_link", "continue_shared",
}  # fmt: skip


def test_every_url_asks_a_stranger_to_sign_in_and_shows_nothing(client, owner):
    session = make_session(owner, exchanges=1)
    session.title = "Secret plans"
    session.save()
    for method, url in chat_urls(session.pk, session.pk):
        response = getattr(client, method)(url)
        if url.startswith("/share/") and not url.endswith("/continue/"):
            assert response.status_code == 404, url  # no link of that token
            continue
        assert response.status_code == 302 and response["Location"].startswith(
            "/accounts/login/"
        ), url
        assert b"Secret plans" not in response.content


def test_every_url_of_another_users_session_is_not_found(client, owner, other_user):
    theirs = make_session(other_user, exchanges=1)
    theirs.title = "Their secret plans"
    theirs.save()
    mine = make_session(owner, exchanges=1)
    client.force_login(owner)
    for method, url in chat_urls(theirs.pk, mine.pk):
        if "/sessions/" not in url or url.endswith(("/new/", "/import/", "/compare/")):
            continue  # not about one session
        response = getattr(client, method)(url)
        assert response.status_code == 404, url
        assert b"Their secret plans" not in response.content
    # and mixing one of theirs with one of mine in side by side
    assert client.get(f"/sessions/{mine.pk}/compare/{theirs.pk}/").status_code == 404


def test_every_state_changing_request_needs_the_csrf_token(owner):
    from django.test import Client

    session = make_session(owner, exchanges=1)
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    for method, url in chat_urls(session.pk, session.pk):
        if method == "post":
            assert client.post(url, {"title": "x", "model": "local"}).status_code == 403, url
    for url in ("/preferences/", "/accounts/logout/", "/accounts/password_change/"):
        assert client.post(url, {}).status_code == 403, url


@pytest.mark.asyncio
async def test_the_api_key_is_in_no_page_log_line_or_error(
    owner, fake_anthropic, open_tab, settings, caplog
):
    from django.test import Client

    from .fake_anthropic import Reply

    secret = "sk-ant-api03-VERY-SECRET-KEY-0123456789"
    settings.ANTHROPIC_API_KEY = secret
    fake_anthropic.enqueue(Reply(mode="status", status=401, error_type="authentication_error"))
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="hello")
    html = await tab.until("Failed:")
    assert "authentication failed: check ANTHROPIC_API_KEY" in html
    sent = fake_anthropic.requests[0]["headers"]
    assert secret in (
        sent.get("x-api-key", ""),
        sent.get("authorization", "").removeprefix("Bearer "),
    )

    def pages() -> str:
        client = Client()
        client.force_login(owner)
        urls = [
            session.get_absolute_url(),
            "/",
            "/preferences/",
            f"/sessions/{session.pk}/export.jsonl",
        ]
        return "".join(b"".join(client.get(url)).decode() for url in urls)

    everything = "".join(tab.received) + await db_async(pages)() + caplog.text
    assert secret not in everything and "VERY-SECRET" not in everything


@pytest.mark.django_db
def test_every_page_sends_the_content_security_policy(client, owner):
    """Read as a client reads headers, without a browser (the Chromium tests check that pages
    keep to it)."""
    client.force_login(owner)
    session = make_session(owner, exchanges=1)
    for url in ("/accounts/login/", "/", session.get_absolute_url(), "/preferences/"):
        policy = client.get(url)["Content-Security-Policy"]
        assert set(policy.split("; ")) == {
            "default-src 'self'", "script-src 'self'", "style-src 'self'",
            "img-src 'self' data:", "connect-src 'self'", "object-src 'none'",
            "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
        }, url  # fmt: skip


def test_a_messages_markdown_is_its_owners_alone(client, owner, other_user):
    theirs = make_session(other_user, exchanges=1)
    entry = theirs.entries.order_by("pk").first()
    client.force_login(owner)
    assert client.get(f"/sessions/{theirs.pk}/entries/{entry.pk}/markdown/").status_code == 404
    client.force_login(other_user)
    answer = client.get(f"/sessions/{theirs.pk}/entries/{entry.pk}/markdown/")
    assert (answer.status_code, answer.content.decode()) == (200, "question 0")
    assert answer["Content-Type"] == "text/plain; charset=utf-8"
