"""Files attached to a message.

Taken by what their bytes are, never by their name or the type the browser claims: an image
Claude reads (PNG, JPEG, GIF, WebP, opened by Pillow), a PDF (read in a process of its own,
`pdf_text`), or UTF-8 text. Kept on Django's storage ("attachments"), served to the owner only.

A message names its files in its content, one block each (`stored_block`): `image` and
`document` as the reference agent's image block has it (`mimeType`), plus `attachment` (the
row's id), `name`, `size`, and what the context meter and the model need (pixels, pages, the
text read from it). The model is sent the API's own block beside a line that names the file
(`api_blocks`); the handoff, coverage, search and the offline model read the line and the text.
"""

from __future__ import annotations

import base64
import io
import json
import mimetypes
import resource
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.files.uploadedfile import UploadedFile
from django.template.defaultfilters import filesizeformat
from PIL import Image, UnidentifiedImageError

from .attached import Block
from .models import Attachment, Refused

Files = Callable[[Block], list[Block]]

MOST_PER_MESSAGE = 10
IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
MOST_PIXELS = 50_000_000  # an image larger than this is refused unread (a decompression bomb)
CLAIMED = {  # what a name or a browser's type claims, and the kind the bytes must then be
    ".png": "PNG image", ".jpg": "JPEG image", ".jpeg": "JPEG image", ".gif": "GIF image",
    ".webp": "WebP image", ".pdf": "PDF",
}  # fmt: skip
PDF_SECONDS = 15
PDF_MEMORY = 768 * 1024 * 1024

TAKES = "agentweb takes images (PNG, JPEG, GIF, WebP), PDFs and text files"
NOT_FOUND = "An attached file was not found (removed, or not yours): attach it again."
TOO_MANY = f"At most {MOST_PER_MESSAGE} files can go with one message."


def storage() -> Any:
    return storages["attachments"]


# --- taking a file -------------------------------------------------------------------------
def take(owner_id: int, session_id: int, upload: UploadedFile) -> Attachment:
    """The uploaded file kept for its owner, or `Refused` with the reason in words."""
    name = (upload.name or "file").replace("/", "_").replace("\\", "_")[:200]
    limit = settings.AGENTWEB_MAX_ATTACHMENT_BYTES
    if (upload.size or 0) > limit:
        raise Refused(
            f"“{name}” is {filesizeformat(upload.size or 0)}: an attachment may be at most "
            f"{filesizeformat(limit)}."
        )
    data = upload.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"“{name}” is larger than {filesizeformat(limit)}, the most it may be.")
    return _kept(owner_id, session_id, name, data, identify(name, data, upload.content_type or ""))


def _kept(
    owner_id: int, session_id: int, name: str, data: bytes, fields: dict[str, Any]
) -> Attachment:
    """The file on the storage, and its row: what it is (`fields`, as `identify` read it)."""
    path = storage().save(f"{owner_id}/{uuid.uuid4().hex}", ContentFile(data))
    return Attachment.objects.create(
        owner_id=owner_id, session_id=session_id, name=name, size=len(data), path=path, **fields
    )


def identify(name: str, data: bytes, claimed_type: str = "") -> dict[str, Any]:
    """What the file is, read from its bytes: the Attachment's kind, media type and what goes
    with it (pixels, pages, text). `Refused` when it is none agentweb takes, or not what its
    name or its type claims."""
    if data.startswith((b"\x89PNG", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")) or (
        data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    ):
        return _image(name, data)
    if data.startswith(b"%PDF-"):
        return _pdf(name, data)
    claimed = CLAIMED.get(_extension(name)) or _claimed_by_type(claimed_type)
    if claimed:
        raise Refused(f"“{name}” is not a {claimed}: its contents say otherwise.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Refused(f"“{name}” cannot be attached: {TAKES}.") from None
    if "\x00" in text:
        raise Refused(f"“{name}” cannot be attached: {TAKES}.")
    guessed = mimetypes.guess_type(name)[0] or ""
    media_type = guessed if guessed.startswith("text/") else "text/plain"
    return {"kind": Attachment.Kind.TEXT, "media_type": media_type, "text": text}


def _extension(name: str) -> str:
    return "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""


def _claimed_by_type(content_type: str) -> str:
    content_type = content_type.split(";")[0].strip().lower()
    return {
        "image/png": "PNG image", "image/jpeg": "JPEG image", "image/gif": "GIF image",
        "image/webp": "WebP image", "application/pdf": "PDF",
    }.get(content_type, "")  # fmt: skip


def _image(name: str, data: bytes) -> dict[str, Any]:
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            image_format = image.format or ""
            if width * height > MOST_PIXELS:
                raise Refused(
                    f"“{name}” is {width:,} × {height:,} pixels: at most "
                    f"{MOST_PIXELS // 1_000_000} million can be attached."
                )
            image.verify()
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError):
        raise Refused(f"“{name}” is not an image agentweb can read: it is damaged.") from None
    if image_format not in IMAGE_FORMATS:
        raise Refused(f"“{name}” cannot be attached: {TAKES}.")
    return {
        "kind": Attachment.Kind.IMAGE,
        "media_type": IMAGE_FORMATS[image_format],
        "width": width,
        "height": height,
    }


def _pdf(name: str, data: bytes) -> dict[str, Any]:
    read = read_pdf(data)
    if "error" in read:
        raise Refused(f"“{name}” cannot be attached: {read['error']}.")
    return {
        "kind": Attachment.Kind.DOCUMENT,
        "media_type": "application/pdf",
        "pages": int(read.get("pages") or 0),
        "text": str(read.get("text") or ""),
    }


def read_pdf(data: bytes) -> dict[str, Any]:
    """`pdf_text` in a process of its own, held to PDF_MEMORY and PDF_SECONDS."""

    def held() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (PDF_MEMORY, PDF_MEMORY))
        resource.setrlimit(resource.RLIMIT_CPU, (PDF_SECONDS, PDF_SECONDS))

    try:
        done = subprocess.run(  # noqa: S603 - this interpreter, a module of this app
            [sys.executable, "-m", "sessions.pdf_text"],
            input=data,
            capture_output=True,
            timeout=PDF_SECONDS + 5,
            preexec_fn=held,  # noqa: PLW1509 - only setrlimit, before the module runs
            cwd=settings.BASE_DIR,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": "reading it took too long"}
    try:
        result = json.loads(done.stdout or b"{}")
    except ValueError:
        result = {}
    if not isinstance(result, dict) or ("text" not in result and "error" not in result):
        return {"error": "reading it took more than agentweb allows"}
    return result


# --- in a message ----------------------------------------------------------------------------
def chosen(owner_id: int, ids: Sequence[int], *, kept: bool = False) -> list[Block]:
    """The blocks of the owner's files `ids`, in that order; `Refused` when one is not theirs
    (with `kept`, a queued prompt's: those gone since are left out)."""
    if len(ids) > MOST_PER_MESSAGE:
        raise Refused(TOO_MANY)
    found = {a.pk: a for a in Attachment.objects.filter(pk__in=ids, owner_id=owner_id)}
    if not kept and any(pk not in found for pk in ids):
        raise Refused(NOT_FOUND)
    return [stored_block(found[pk]) for pk in dict.fromkeys(ids) if pk in found]


def stored_block(attachment: Attachment) -> Block:
    """The file as its message's content keeps it."""
    kind = {"image": "image", "document": "document"}.get(attachment.kind, "file")
    block: Block = {
        "type": kind,
        "mimeType": attachment.media_type,
        "attachment": attachment.pk,
        "name": attachment.name,
        "size": attachment.size,
    }
    if attachment.kind == Attachment.Kind.IMAGE:
        block |= {"width": attachment.width, "height": attachment.height}
    if attachment.kind == Attachment.Kind.DOCUMENT:
        block["pages"] = attachment.pages
    if attachment.text:
        block["text"] = attachment.text
    return block


def reader(owner_id: int) -> Files:
    """The API's blocks for a stored block of the owner's files: the image or the document,
    its bytes from the storage (nothing when the file is gone: its line says what it was)."""
    paths: dict[int, str | None] = {}

    def api_blocks(block: Block) -> list[Block]:
        kind = block.get("type")
        if kind not in ("image", "document"):
            return []
        pk = block["attachment"]
        if pk not in paths:
            found = Attachment.objects.filter(pk=pk, owner_id=owner_id).values_list("path")
            paths[pk] = next((path for (path,) in found), None)
        path = paths[pk]
        if path is None:
            return []
        try:
            with storage().open(path, "rb") as kept:
                data = base64.b64encode(kept.read()).decode("ascii")
        except OSError:
            return []
        source = {"type": "base64", "media_type": str(block.get("mimeType")), "data": data}
        return [{"type": kind, "source": source}]

    return api_blocks


# --- reading and writing session files --------------------------------------------------------
def from_image_block(owner_id: int, session_id: int, block: Block) -> Block | None:
    """An imported image block (`{data, mimeType}`) kept as a file of the importer's; None when
    its data is not an image agentweb takes (the block then stays a placeholder)."""
    try:
        data = base64.b64decode(str(block.get("data") or ""), validate=True)
    except ValueError:
        return None
    if not data or len(data) > settings.AGENTWEB_MAX_ATTACHMENT_BYTES:
        return None
    name = f"image{mimetypes.guess_extension(str(block.get('mimeType') or '')) or ''}"
    try:
        fields = _image(name, data)
    except Refused:
        return None
    return stored_block(_kept(owner_id, session_id, name, data, fields))


def as_image_block(owner_id: int, block: Block) -> Block:
    """A stored image block as the reference agent's file has it (`{type, data, mimeType}`)."""
    found = reader(owner_id)(block)
    data = found[0]["source"]["data"] if found else ""
    return {"type": "image", "data": data, "mimeType": block.get("mimeType")}
