"""A PDF's page count and text, read in a process of its own: `python -m sessions.pdf_text`
reads the file on standard input and writes `{"pages": n, "text": "…"}` (or `{"error": …}`).

A hostile PDF (a stream that inflates to gigabytes, a page tree of a million pages, a parser
loop) costs that process, held to `LIMITS` of memory and CPU time by the kernel, and never
the server's: `attachments.read_pdf` runs it and refuses the file when it fails."""

from __future__ import annotations

import io
import json
import sys

MAX_PAGES = 100  # Claude reads at most 100 pages of a PDF
MAX_TEXT_CHARS = 200_000


def read(data: bytes) -> dict[str, object]:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    pages = len(reader.pages)
    if pages > MAX_PAGES:
        return {"pages": pages, "error": f"it has {pages:,} pages (at most {MAX_PAGES})"}
    texts: list[str] = []
    length = 0
    for page in reader.pages:
        if length >= MAX_TEXT_CHARS:
            break
        text = page.extract_text() or ""
        texts.append(text)
        length += len(text)
    return {"pages": pages, "text": "\n\n".join(t for t in texts if t.strip())[:MAX_TEXT_CHARS]}


def main() -> None:
    try:
        result = read(sys.stdin.buffer.read())
    except Exception as error:  # any parser failure: the file is refused, said in one line
        why = "it unpacks to more than agentweb reads" if "Limit" in type(error).__name__ else ""
        result = {"error": why or f"it could not be read ({type(error).__name__})"}
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()
