"""The reference agent's session file (JSONL), and Markdown (SPEC.md §5): export
(exporting.py); import, every version, checked before anything is written (reading.py,
importing.py)."""

from .exporting import export_jsonl, export_markdown
from .importing import import_jsonl
from .reading import InvalidSessionFile, read_lines

__all__ = [
    "InvalidSessionFile",
    "export_jsonl",
    "export_markdown",
    "import_jsonl",
    "read_lines",
]
