"""The store database: three JSON tables keyed by id, loaded once, copied per episode, hashed.

The layout follows tau-bench's retail domain so its data files can be used as they are::

    {"users":    {user_id: {user_id, name: {first_name, last_name}, address, email,
                            payment_methods: {id: {source, id, ...}}, orders: [order_id]}},
     "products": {product_id: {name, product_id, variants: {item_id: {item_id, options,
                                                                       available, price}}}},
     "orders":   {order_id: {order_id, user_id, address, items: [...], fulfillments: [...],
                             status, payment_history: [{transaction_type, amount,
                                                        payment_method_id}]}}}

Hashing is canonical: keys sorted at every level, lists kept in order, so two databases hash equal
iff they hold the same JSON values (tau-bench's ``to_hashable`` + ``consistent_hash`` contract).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

TABLES: tuple[str, ...] = ("users", "products", "orders")
MAX_DB_BYTES = 64 * 1024 * 1024  # a table file larger than this is refused, not read

Database = dict[str, dict[str, Any]]


class DatabaseError(ValueError):
    """A database directory or table is missing or malformed."""


def load_db(directory: str | Path | None = None) -> Database:
    """Loads ``users.json``, ``products.json`` and ``orders.json``.

    Args:
        directory: a folder holding the three tables (e.g. tau-bench's
            ``tau_bench/envs/retail/data``); ``None`` loads the store shipped with the package.

    Raises:
        DatabaseError: naming the file and what is wrong with it.
    """
    db: Database = {}
    for table in TABLES:
        if directory is None:
            source = resources.files("tasks.tooluse").joinpath("data").joinpath(f"{table}.json")
            name, text = f"tasks/tooluse/data/{table}.json", source.read_text(encoding="utf-8")
        else:
            path = Path(directory) / f"{table}.json"
            if not path.is_file():
                raise DatabaseError(
                    f"{path}: not found; a database folder holds users.json, products.json "
                    "and orders.json (tau-bench's retail data folder has this layout)."
                )
            if path.stat().st_size > MAX_DB_BYTES:
                raise DatabaseError(f"{path}: larger than {MAX_DB_BYTES} bytes; refused.")
            name, text = str(path), path.read_text(encoding="utf-8")
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatabaseError(f"{name}: not valid JSON ({exc}).") from exc
        if not isinstance(rows, dict) or not all(isinstance(v, dict) for v in rows.values()):
            raise DatabaseError(f"{name}: expected a JSON object mapping ids to records.")
        db[table] = rows
    return db


def copy_db(db: Mapping[str, Any]) -> Database:
    """A deep copy of a JSON database (a fresh episode's or a transaction's working copy)."""
    copied: Database = _copy(db)
    return copied


def _copy(value: Any) -> Any:
    # Faster than copy.deepcopy for pure JSON values (no memo, no reductor look-ups).
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


_MISSING = object()


class RowCopies:
    """One table seen through a :class:`Transaction`: every row read is deep-copied once, and
    writes go to those copies, never to the table.

    Only ``get``, ``[]``, ``in`` and item assignment exist: a tool that iterates a table inside a
    transaction fails loudly (an error result, the database untouched) instead of silently
    reading rows it could then mutate.
    """

    def __init__(self, rows: dict[str, Any]) -> None:
        self._rows = rows
        self.copies: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.copies:
            return self.copies[key]
        if key not in self._rows:
            return default
        row = self.copies[key] = _copy(self._rows[key])
        return row

    def __getitem__(self, key: str) -> Any:
        row = self.get(key, _MISSING)
        if row is _MISSING:
            raise KeyError(key)
        return row

    def __contains__(self, key: object) -> bool:
        return key in self.copies or key in self._rows

    def __setitem__(self, key: str, value: Any) -> None:
        self.copies[key] = value


class Transaction:
    """A copy-on-read view of a database for one writing tool call: ``view[table]`` is a
    :class:`RowCopies`; :meth:`commit` writes the touched rows back. Work is proportional to the
    rows the tool touches, not to the size of the database."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.tables = {name: RowCopies(rows) for name, rows in db.items()}

    def view(self) -> dict[str, RowCopies]:
        """What the tool receives as its database."""
        return self.tables

    def commit(self) -> None:
        """Applies every touched row (read rows are unchanged copies: writing them back is a
        no-op for the content)."""
        for name, table in self.tables.items():
            self._db[name].update(table.copies)


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the canonical text that :func:`canonical_hash` digests."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_hash(db: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``db`` (order of dict keys never matters)."""
    return hashlib.sha256(canonical_json(db).encode("utf-8")).hexdigest()
