"""In Chromium (issue 56, item 1): **Attach** (and a drop on the composer) uploads a file at once
and shows it as a chip with Remove; the message takes it along; the transcript shows the image,
which opens full size; a file that lies about itself is refused in words."""

from __future__ import annotations

import base64
import re

import pytest
from playwright.sync_api import expect

from ..files import png
from .test_accessibility_page import serious_violations

pytestmark = pytest.mark.django_db(transaction=True)

DROP_A_TEXT_FILE = """() => {
  const files = new DataTransfer();
  files.items.add(new File(["remember port 8443\\n"], "notes.txt", { type: "text/plain" }));
  document.querySelector("#message").dispatchEvent(
    new DragEvent("drop", { dataTransfer: files, bubbles: true, cancelable: true }));
}"""


PASTE_AN_IMAGE = """() => {
  const files = new DataTransfer();
  const bytes = Uint8Array.from(atob("%s"), (c) => c.charCodeAt(0));
  files.items.add(new File([bytes], "", { type: "image/png" }));
  document.querySelector("#message").dispatchEvent(
    new ClipboardEvent("paste", { clipboardData: files, bubbles: true, cancelable: true }));
}"""


def new_session(page) -> None:
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))


@pytest.mark.parametrize("width", [1440, 375])
def test_an_attached_image_goes_with_the_message_and_opens_full_size(
    signed_in, server_url, width, tmp_path
):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 800})
    new_session(page)
    shot = tmp_path / "shot.png"
    shot.write_bytes(png(60, 40))
    page.get_by_label("Attach", exact=True).set_input_files(str(shot))
    chips = page.locator("#attached li[data-attachment]")
    expect(chips).to_have_count(1)
    expect(chips).to_contain_text("shot.png")
    remove = page.get_by_role("button", name="Remove shot.png")
    box = remove.bounding_box()
    assert box is not None and box["height"] >= 44, box  # a target a thumb can take
    page.evaluate(DROP_A_TEXT_FILE)
    expect(chips).to_have_count(2)
    page.get_by_role("button", name="Remove notes.txt").click()
    expect(chips).to_have_count(1)
    page.screenshot(path=f"test-artifacts/attach-{width}.png")

    page.get_by_label("Message").fill("What is in it?")
    page.get_by_label("Message").press("Enter")
    shown = page.locator("#transcript img[alt='shot.png']")
    expect(shown).to_be_visible()
    expect(page.locator("#transcript")).to_contain_text("You attached 1 file:")
    expect(page.locator("#transcript")).to_contain_text("shot.png (image/png, 60×40 px, ")
    expect(chips).to_have_count(0)  # the files went with the message
    full = page.locator("#transcript a.attached-image").get_attribute("href")
    opened = page.request.get(f"{server_url}{full}")
    assert opened.status == 200 and opened.headers["content-type"] == "image/png"


def test_a_file_that_lies_about_its_type_is_refused_in_words(signed_in, tmp_path):
    page = signed_in
    new_session(page)
    fake = tmp_path / "holiday.png"
    fake.write_text("<html><script>alert(1)</script></html>")
    page.get_by_label("Attach", exact=True).set_input_files(str(fake))
    expect(page.get_by_role("alert")).to_have_text(
        "“holiday.png” is not a PNG image: its contents say otherwise."
    )
    expect(page.locator("#attached li")).to_have_count(0)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_composer_with_files_has_no_serious_accessibility_violation(
    signed_in, tmp_path, scheme
):
    page = signed_in
    page.emulate_media(color_scheme=scheme)
    new_session(page)
    shot = tmp_path / "shot.png"
    shot.write_bytes(png())
    page.get_by_label("Attach", exact=True).set_input_files(str(shot))
    page.evaluate(DROP_A_TEXT_FILE)
    expect(page.locator("#attached li[data-attachment]")).to_have_count(2)
    assert serious_violations(page, f"composer with files ({scheme})") == []


def test_a_pasted_screenshot_is_attached(signed_in):
    page = signed_in
    new_session(page)
    page.evaluate(PASTE_AN_IMAGE % base64.b64encode(png(30, 20)).decode())
    chip = page.locator("#attached li[data-attachment]")
    expect(chip).to_contain_text("pasted-image.png")
    page.get_by_label("Message").fill("from the clipboard")
    page.get_by_label("Message").press("Enter")
    expect(page.locator("#transcript img[alt='pasted-image.png']")).to_be_visible()
