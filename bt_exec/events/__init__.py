"""Events out of the runtime: the bus that delivers them, and the JSONL journal that keeps them."""
from .bus import EventBus
from .journal import JsonlJournal

__all__ = ["EventBus", "JsonlJournal"]
