"""Files the attachment tests upload: made here, byte by byte, so each says what it is."""

from __future__ import annotations

import io
import zlib

from PIL import Image


def png(width: int = 40, height: int = 30, colour: str = "teal") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def pdf(content: bytes, *, compress: bool = False) -> bytes:
    """A one-page PDF whose page draws `content` (a content stream), with a true xref table."""
    stream = zlib.compress(content, 1) if compress else content
    filters = b" /Filter /FlateDecode" if compress else b""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d%s >>\nstream\n" % (len(stream), filters) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    table = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        table,
    )
    return bytes(out)


def pdf_saying(text: str) -> bytes:
    return pdf(b"BT /F1 12 Tf 10 50 Td (%s) Tj ET" % text.encode("latin-1"))


def pdf_bomb() -> bytes:
    """A PDF of 200 KB whose page's stream inflates to 200 MB."""
    return pdf(b"0" * 200_000_000, compress=True)
