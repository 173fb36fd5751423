"""What a tab's socket cannot take yet waits for it, in order, and a tab closed while its
socket is full is a normal end: daphne's own writes, filled and cut off."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.client import connect

from sessions.models import Entry

from .conftest import _cookie_for, claude_env, db_async, make_session
from .fake_anthropic import FakeAnthropic, Reply
from .servers import ARTIFACTS, Daphne, read_until_idle

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def server(django_db_setup: Any, fake_server: FakeAnthropic) -> Iterator[Daphne]:
    daphne = Daphne("daphne-writes", **claude_env(fake_server.url))
    yield daphne
    daphne.stop()


def small_receive_buffer(server: Daphne) -> socket.socket:
    """A connected socket whose receive buffer stays small (the kernel would otherwise grow it
    to take the whole reply, and the server's side would never fill)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    return sock


async def test_replies_larger_than_the_sockets_buffers_reach_a_tab_that_stopped_reading_whole(
    server, owner, fake_anthropic
):
    # Four replies of 300 paragraphs of 2 KB: their deltas, rendered blocks and entries are
    # about 4.9 MB, more than a socket's send buffer holds here (each message under daphne's
    # 1 MB), in a window that takes the three before the last.
    fake_anthropic.window = 5_000_000
    for reply in range(4):
        paragraphs = [f"r{reply}p{i:03d} {'abcdefghij' * 200}\n\n" for i in range(300)]
        fake_anthropic.enqueue(Reply(paragraphs, delay=0.001, within_max_tokens=False))
    session = await db_async(make_session)(owner)
    cookie = await _cookie_for(owner)
    replies = Entry.objects.filter(session=session, role="assistant", status="complete")
    async with connect(
        server.ws_url(f"/ws/sessions/{session.pk}/"),
        sock=small_receive_buffer(server),
        additional_headers={"Cookie": f"sessionid={cookie}"},
        origin=server.url,  # type: ignore[arg-type]
        max_size=None,
        max_queue=1,
    ) as tab:
        for prompt in range(4):
            await tab.send(json.dumps({"message": f"Write a lot, {prompt}"}))
        # The tab reads nothing until the four replies are stored: what the server sent it
        # meanwhile waits in the server's socket, then in its process.
        async with asyncio.timeout(60):
            while await db_async(replies.count)() < 4:
                await asyncio.sleep(0.1)
            received: list[str] = []
            while sum(frame.count("entry--assistant status--complete") for frame in received) < 4:
                received.append(str(await tab.recv()))
        await read_until_idle(tab, received)
    streamed = "".join(received)
    first_seen = [streamed.find(f"r{r}p{i:03d} ") for r in range(4) for i in range(300)]
    assert -1 not in first_seen
    assert first_seen == sorted(first_seen)
    assert streamed.count("abcdefghij" * 200) >= 4 * 300


# The browser's close frame (code 1000), masked as a client's frames are.
MASK = b"\x01\x02\x03\x04"
CLOSE_FRAME = b"\x88\x82" + MASK + bytes(a ^ b for a, b in zip(b"\x03\xe8", MASK, strict=False))


async def test_a_tab_closed_during_a_burst_of_deltas_is_a_normal_end_not_an_error(
    server, owner, fake_anthropic
):
    log = ARTIFACTS / "daphne-writes.log"
    start = log.stat().st_size
    # 5,000 paragraphs of 2 KB: more than the sockets' buffers hold, so the closing connection
    # is not gone at once (its last writes wait), and the server has more to send it meanwhile.
    fake_anthropic.window = 5_000_000
    paragraphs = [f"p{i:04d} {'abcdefghij' * 200}\n\n" for i in range(5_000)]
    fake_anthropic.enqueue(Reply(paragraphs, delay=0.001, within_max_tokens=False))
    session = await db_async(make_session)(owner)
    cookie = await _cookie_for(owner)
    async with connect(
        server.ws_url(f"/ws/sessions/{session.pk}/"),
        sock=small_receive_buffer(server),
        additional_headers={"Cookie": f"sessionid={cookie}"},
        origin=server.url,  # type: ignore[arg-type]
        max_size=None,
        max_queue=1,
        close_timeout=0.1,
    ) as tab:
        await tab.send(json.dumps({"message": "Stream a lot"}))
        async with asyncio.timeout(10):
            while "p0001 " not in str(await tab.recv()):
                pass
        # The tab closes (its close frame sent, its connection not yet gone) and reads no more,
        # while the server still has deltas to send it.
        await asyncio.sleep(2)  # meanwhile the server fills the sockets' buffers
        tab.transport.write(CLOSE_FRAME)
        replies = Entry.objects.filter(session=session, role="assistant", status="complete")
        async with asyncio.timeout(30):
            while not await db_async(replies.exists)():
                await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)  # daphne reports an application's exception within a second
    said = log.read_text()[start:]
    assert "Attempt to send on a closed protocol" not in said
    assert "Exception inside application" not in said
