"""Where runs live: the store's port (`base`) and its adapters — run folders (the
default), memory, PostgreSQL. The two that need nothing beyond the standard library
register here; PostgreSQL registers when a `postgresql://` location is first asked for
(the `todoflow.stores` entry points, which any package can add a backend to)."""

from . import folder, memory

__all__ = ["folder", "memory"]
