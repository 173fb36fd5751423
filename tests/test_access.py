"""Who may open what: the WebSocket's origin check, and closing sockets at sign-out."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator

from .conftest import _cookie_for, db_async, make_session

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


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
async def test_a_page_of_another_origin_cannot_open_the_socket(owner, origin):
    session = await db_async(make_session)(owner, exchanges=1)
    assert not await connect(owner, session, origin)


async def test_a_socket_without_an_origin_is_refused(owner):
    session = await db_async(make_session)(owner, exchanges=1)
    assert not await connect(owner, session, None)


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


async def test_a_host_outside_allowed_hosts_is_refused_even_from_its_own_origin(owner, settings):
    settings.ALLOWED_HOSTS = ["localhost"]
    session = await db_async(make_session)(owner, exchanges=1)
    assert not await connect(owner, session, b"http://attacker.example", host=b"attacker.example")


async def test_behind_a_tls_proxy_the_trusted_origin_is_allowed(owner, settings):
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com", "https://*.corp.example"]
    session = await db_async(make_session)(owner, exchanges=1)
    # The proxy speaks plain ws to daphne; the browser's page is https.
    assert await connect(owner, session, b"https://chat.example.com", host=b"chat.example.com")
    assert await connect(owner, session, b"https://team.corp.example", host=b"chat.example.com")
    assert not await connect(owner, session, b"https://corp.example.evil", host=b"chat.example.com")
    assert not await connect(owner, session, b"http://team.corp.example", host=b"chat.example.com")


async def test_signing_out_closes_the_sockets_of_that_sign_in_and_no_other(owner):
    from django.test import Client

    from agentweb.asgi import application

    session = await db_async(make_session)(owner, exchanges=1)
    cookies = [await _cookie_for(owner), await _cookie_for(owner)]  # two browsers
    tabs = []
    for cookie in cookies:
        tab = WebsocketCommunicator(
            application,
            f"/ws/sessions/{session.pk}/",
            headers=[
                (b"cookie", f"sessionid={cookie}".encode()),
                (b"origin", b"http://localhost"),
                (b"host", b"localhost"),
            ],
        )
        assert (await tab.connect())[0]
        while 'id="status"' not in await tab.receive_from():  # the catch-up ends with the status
            pass
        tabs.append(tab)

    def sign_out(cookie: str) -> int:
        client = Client()
        client.cookies["sessionid"] = cookie
        return client.post("/accounts/logout/").status_code

    assert await db_async(sign_out)(cookies[0]) == 302
    closed = await tabs[0].receive_output(timeout=2)
    assert closed == {"type": "websocket.close", "code": 4401}
    assert await tabs[1].receive_nothing(timeout=0.3)  # the other browser is still signed in
    await tabs[1].disconnect()
