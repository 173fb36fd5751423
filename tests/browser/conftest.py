"""Browser tests: the real server (daphne, in its own process) and the system Chromium.

Without Chromium these tests skip and say how to enable them; with
AGENTWEB_REQUIRE_BROWSER=1 (set by .ci/run) a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..servers import ARTIFACTS, Daphne

__all__ = ["ARTIFACTS"]


CHROMIUM = os.environ.get("AGENTWEB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def _browser_missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return (
            "Chromium is not installed: install it (Debian: apt-get install chromium) "
            "to run the browser tests"
        )
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "Playwright is not installed: run make install"
    return None


@pytest.fixture(scope="module", autouse=True)
def orm_beside_playwright() -> Iterator[None]:
    """Playwright's sync API runs an event loop in the test's thread: let these modules (only
    these: elsewhere a database call on an event loop must stay an error) use the ORM, from
    their first fixture to their last teardown."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture(scope="session")
def browser_available() -> None:
    if reason := _browser_missing():
        if os.environ.get("AGENTWEB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{reason} (AGENTWEB_REQUIRE_BROWSER=1 makes this a failure)")
        pytest.skip(reason)


def offline_server(name: str, token_delay: str) -> Iterator[str]:
    """daphne serving agentweb on the test database, with the offline model and no key."""
    server = Daphne(
        name, AGENTWEB_MODEL="local", ANTHROPIC_API_KEY="", AGENTWEB_LOCAL_TOKEN_DELAY=token_delay
    )
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def claude_url(django_db_setup: Any, browser_available: None, fake_server: Any) -> Iterator[str]:
    """daphne serving agentweb with Claude at the fake Anthropic server."""
    from ..conftest import claude_env

    server = Daphne("daphne-browser-claude", **claude_env(fake_server.url))
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def server_url(django_db_setup: Any, browser_available: None) -> Iterator[str]:
    """The offline model at a pace a test can cancel in the middle of."""
    yield from offline_server("daphne-browser", os.environ.get("AGENTWEB_TEST_TOKEN_DELAY", "0.04"))


@pytest.fixture(scope="session")
def browser(browser_available: None) -> Iterator[Any]:
    """One Chromium for every browser test (each has a context of its own): the browser tests
    run last (tests/conftest.py), so Playwright's loop meets no async test."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def sign_in(page: Any, server_url: str, django_user_model: Any, username: str) -> Any:
    """The page, signed in as a fresh user of that name."""
    django_user_model.objects.create_user(username, password=f"{username}-pass-123")
    page.goto(f"{server_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"{username}-pass-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{server_url}/")
    return page


@pytest.fixture
def signed_in(page: Any, server_url: str, transactional_db: None, django_user_model: Any) -> Any:
    """A page signed in as a fresh user."""
    return sign_in(page, server_url, django_user_model, "walker")


def focus_by_tab(page: Any, target: Any, *, key: str = "Tab", limit: int = 80) -> None:
    """Press Tab (or Shift+Tab) until `target` has the focus, as a keyboard user would."""
    for _ in range(limit):
        page.keyboard.press(key)
        if target.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"{key} never reached {target}")
