"""tf.data.experimental.SqlDataset's op (SqlDataset) on Python's sqlite3, as TF 2.21 runs it.

TF checks the driver ("sqlite" only) and the output types when the dataset is made;
a pass opens the database read-write (creating a missing file, as sqlite does),
prepares the query (UnknownError "Prepare() failed: [code] message: query"; an
InvalidArgumentError when its column count is not the number of output types) and
reads each row's columns as sqlite's C API converts them: integer types through
`sqlite3_column_int64` (then wrapped to the type), double through
`sqlite3_column_double`, bool as `int64 != 0`, strings as the column's bytes (NULL
empty, numbers in sqlite's own text).  The conversions here are sqlite's own: each row
goes through `SELECT CAST(? AS INTEGER) | CAST(? AS REAL) | CAST(? AS TEXT)` on an
in-memory connection, which applies the same rules (text prefixes, saturating real to
integer, sqlite's number formatting).

Rows are fetched and converted on a worker thread, many per hop; a pass's connections
are used by one thread at a time.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from asyncflow import dtypes, errors
from asyncflow.ops import dataset_ops as dso
from asyncflow.ops import dataset_pipeline as pl

__all__: list[str] = []

_ROWS_PER_HOP = 256
# TF's SqlDatasetOp accepts these (its message lists them in this order).
_SUPPORTED = (dtypes.string, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
              dtypes.uint8, dtypes.uint16, dtypes.bool, dtypes.float64)  # fmt: skip
_TYPE_NAMES = (
    "DT_STRING, DT_INT8, DT_INT16, DT_INT32, DT_INT64, DT_UINT8, DT_UINT16, DT_BOOL, DT_DOUBLE"
)


def _bad(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


class _Pass:
    """One pass: the database connection, its cursor, and the converting connection."""

    def __init__(self, path: str, query: str, types: list):
        self.types = types
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.text_factory = bytes
        try:
            self.cursor = self.conn.execute(query)
        except sqlite3.Error as e:
            self.conn.close()
            code = getattr(e, "sqlite_errorcode", 1)
            raise errors.UnknownError(
                None, None, f"Prepare() failed: [{code}] {e}: {query}"
            ) from None
        n = len(self.cursor.description or ())
        if n != len(types):
            self.conn.close()
            raise _bad(
                f"The number of columns in query ({n}) must match the number of elements "
                f"in output_types ({len(types)})."
            )
        casts = ["CAST(? AS TEXT)" if dt == dtypes.string else
                 "CAST(? AS REAL)" if dt == dtypes.float64 else
                 "CAST(? AS INTEGER)" for dt in types]  # fmt: skip
        self.casts = sqlite3.connect(":memory:", check_same_thread=False)
        self.casts.text_factory = bytes
        self.cast_sql = "SELECT " + ", ".join(casts)

    def _element(self, row) -> tuple:
        # a TEXT or BLOB value (bytes here) casts to TEXT unchanged; NULL reads as 0 / ""
        vals = self.casts.execute(self.cast_sql, row).fetchone()
        out = []
        for raw, v, dt in zip(row, vals, self.types):
            if dt == dtypes.string:
                out.append(np.array(raw if isinstance(raw, bytes) else (v or b""), dtype=object))
            elif dt == dtypes.float64:
                out.append(np.array(0.0 if v is None else v, np.float64))
            elif dt == dtypes.bool:
                out.append(np.array(bool(v)))
            else:
                wrapped = np.array((v or 0) & (2**64 - 1), np.uint64)
                out.append(wrapped.astype(dt.as_numpy_dtype))
        return tuple(out)

    def fetch(self) -> list:
        try:
            rows = self.cursor.fetchmany(_ROWS_PER_HOP)
        except sqlite3.Error as e:
            raise errors.UnknownError(None, None, str(e)) from None
        return [self._element(r) for r in rows]

    def close(self) -> None:
        self.conn.close()
        self.casts.close()


class Sql(pl.DatasetValue):
    def __init__(self, path: str, query: str, types: list):
        self.path, self.query, self.types = path, query, types

    async def iterate(self, env):
        q = await pl._in_thread(_Pass, self.path, self.query, self.types)
        try:
            while True:
                elems = await pl._in_thread(q.fetch)
                if not elems:
                    return
                for e in elems:
                    yield e
        finally:
            await pl._in_thread(q.close)


async def _sql(ctx, driver, source, query):
    d = dso._str(driver)
    if d != "sqlite":
        raise _bad(
            f"The database type, {d}, is not supported by SqlDataset. The set of supported "
            "databases is: {'sqlite'}."
        )
    types = list(ctx.attrs["output_types"])
    if any(t not in _SUPPORTED for t in types):
        raise _bad(f"Each element of `output_types_` must be one of: {_TYPE_NAMES} ")
    return dso._handle(Sql(dso._str(source), dso._str(query), types))


dso._register(
    "SqlDataset", ["driver_name: string", "data_source_name: string", "query: string"], None, _sql
)
