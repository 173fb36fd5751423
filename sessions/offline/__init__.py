"""The offline model: what it says (reply.py) and how it writes a document (summariser.py)."""

from .reply import OfflineModel, go_on, respond

__all__ = ["OfflineModel", "go_on", "respond"]
