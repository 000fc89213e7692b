"""The central data model: the ledger (what ran and what it cost) and the receipt around it.

Nothing here imports torch."""

from .ledger import SCHEMA_VERSION, Call, Compilation, Ledger
from .receipt import Receipt

__all__ = ["SCHEMA_VERSION", "Call", "Compilation", "Ledger", "Receipt"]
