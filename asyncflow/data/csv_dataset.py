"""CSV input pipelines: `tf.data.experimental.CsvDataset` and `make_csv_dataset` (TF1's
`tf.compat.v1.data.experimental` forms; the records are parsed by ops/dataset_more.py's
CSVDatasetV2 stage, TF 2.x's form with exclude_cols).

`make_csv_dataset` reads, when the graph is built, what TF reads then: the header row
of every file (the column names, which must agree) and, without `column_defaults`, the
first `num_rows_for_inference` rows to choose each column's type — the narrowest of
int32, int64, float32, float64 and string that holds every value seen.
"""

from __future__ import annotations

import collections
import csv
import io
import math

import numpy as np

from asyncflow import dtypes, gfile
from asyncflow import graph as ops
from asyncflow.data.dataset import AUTOTUNE, Dataset, _i64
from asyncflow.data.structure import _Spec
from asyncflow.ops import dataset_ops

__all__ = ["CsvDataset", "CsvDatasetV1", "CsvDatasetV2", "make_csv_dataset"]

_TYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.string)


def _default(d, name=None) -> ops.Tensor:
    """A record default as TF converts it: [0] int32, [0.0] float32, [""] string; an
    empty tensor marks a required column."""
    if isinstance(d, ops.Tensor):
        t = d
    elif isinstance(d, np.ndarray):
        t = ops.convert_to_tensor(d, name=name)
    elif isinstance(d, (list, tuple)):
        t = ops.convert_to_tensor(d if len(d) else np.zeros(0, np.float32), name=name)
    else:
        t = ops.convert_to_tensor([d], name=name)
    if t.dtype.base_dtype not in _TYPES:
        raise TypeError(
            f"Unsupported type for record_defaults: {t.dtype.name} (one of float32, "
            "float64, int32, int64, string)."
        )
    return t


class CsvDatasetV2(Dataset):
    """The records of CSV files, each a tuple of one scalar per (selected or not
    excluded) column: TF 2's class, which TF's compat.v1 CsvDataset wraps.

    Raises (at run time): InvalidArgumentError for a record with the wrong number of
    fields, an unparsable number or a missing required field; NotFoundError for a file
    that does not exist.
    """

    def __init__(
        self,
        filenames,
        record_defaults,
        compression_type=None,
        buffer_size=None,
        header=False,
        field_delim=",",
        use_quote_delim=True,
        na_value="",
        select_cols=None,
        exclude_cols=None,
    ):
        # TF 2.21 builds this (graph names included, no name scope) as one CSVDatasetV2
        # op; select_cols together with exclude_cols fails when the op runs, as there.
        defaults = [_default(d, f"record_defaults_{k}") for k, d in enumerate(record_defaults)]
        if select_cols is not None:
            cols = [int(c) for c in select_cols]
            if any(a >= b for a, b in zip(cols, cols[1:])):
                raise ValueError("select_cols is not strictly increasing.")
            if cols and cols[0] < 0:
                raise ValueError("select_cols contains negative values.")
            if len(cols) != len(defaults):
                raise ValueError("Length of select_cols and record_defaults do not match.")
        else:
            cols = []
        types = [d.dtype.base_dtype for d in defaults]
        super().__init__(None, tuple(_Spec(t, []) for t in types))
        excluded = [] if exclude_cols is None else [int(c) for c in exclude_cols]

        def const(value, dtype, name):
            return ops.convert_to_tensor(value, dtype=dtype, name=name)

        inputs = [
            const(filenames, dtypes.string, "filenames"),
            const(compression_type or "", dtypes.string, "compression_type"),
            _i64(buffer_size or 0, "buffer_size"),
            const(bool(header), dtypes.bool, "header"),
            const(field_delim, dtypes.string, "field_delim"),
            const(bool(use_quote_delim), dtypes.bool, "use_quote_delim"),
            const(na_value, dtypes.string, "na_value"),
            const(np.asarray(cols, np.int64), dtypes.int64, "select_cols"),
            defaults,
            const(np.asarray(excluded, np.int64), dtypes.int64, "exclude_cols"),
        ]
        self._variant = dataset_ops.dataset_op(
            "CSVDatasetV2", inputs, self._out_attrs(), name="CSVDatasetV2"
        )


class CsvDatasetV1(CsvDatasetV2):
    """`tf.compat.v1.data.experimental.CsvDataset`: TF 2's class without exclude_cols.

    TF 2.21's compat.v1 class documents exclude_cols but its constructor does not take
    it (a TypeError naming CsvDatasetV1.__init__), so TF1 programs never pass it.
    """

    def __init__(
        self,
        filenames,
        record_defaults,
        compression_type=None,
        buffer_size=None,
        header=False,
        field_delim=",",
        use_quote_delim=True,
        na_value="",
        select_cols=None,
    ):
        super().__init__(
            filenames,
            record_defaults,
            compression_type,
            buffer_size,
            header,
            field_delim,
            use_quote_delim,
            na_value,
            select_cols,
        )


CsvDataset = CsvDatasetV1


# -- make_csv_dataset ----------------------------------------------------------------------


def _rows(path: str, delim: str, quote: bool, encoding: str = "utf-8"):
    # (as TF, the header and the rows it infers types from are read in `encoding`;
    # the records themselves stay bytes)
    with gfile.GFile(path, "rb") as f:
        text = f.read().decode(encoding)
    return csv.reader(
        io.StringIO(text), delimiter=delim, quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE
    )


def _fits(value: str, dt) -> bool:
    if dt == dtypes.string:
        return True
    try:
        if dt.is_integer:
            v = int(value)
            return bool(np.iinfo(dt.as_numpy_dtype).min <= v <= np.iinfo(dt.as_numpy_dtype).max)
        v = float(value)
    except ValueError:
        return False
    if dt == dtypes.float32 and math.isfinite(v):
        return abs(v) <= float(np.finfo(np.float32).max)
    return True


_ORDER = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64, dtypes.string)


def _infer_types(paths, n_cols, select, delim, quote, na, header, limit, encoding) -> list:
    """Each (selected) column's narrowest type in _ORDER over the first `limit` rows."""
    kinds = [0] * n_cols
    seen = 0
    for path in paths:
        rows = _rows(path, delim, quote, encoding)
        if header:
            next(rows, None)
        for row in rows:
            if seen >= limit:
                break
            seen += 1
            fields = [row[c] for c in select] if select is not None else row
            for c, value in enumerate(fields[:n_cols]):
                if value == "" or value == na:
                    continue
                while not _fits(value, _ORDER[kinds[c]]):
                    kinds[c] += 1
        if seen >= limit:
            break
    return [_ORDER[k] for k in kinds]


def make_csv_dataset(
    file_pattern,
    batch_size,
    column_names=None,
    column_defaults=None,
    label_name=None,
    select_columns=None,
    field_delim=",",
    use_quote_delim=True,
    na_value="",
    header=True,
    num_epochs=None,
    shuffle=True,
    shuffle_buffer_size=10000,
    shuffle_seed=None,
    prefetch_buffer_size=None,
    num_parallel_reads=None,
    sloppy=False,
    num_rows_for_inference=100,
    compression_type=None,
    ignore_errors=False,
    encoding="utf-8",
):
    """Batches of (features, label) from CSV files: `features` a dict of column name to
    a [batch] tensor, `label` the `label_name` column (without it, features only).
    With `num_epochs` None the files repeat forever and partial batches are dropped.

    Raises:
      ValueError: no file matches; no column names (header=False and none given);
        files with different header rows; a label_name or select_columns entry that is
        not a column; column_defaults of the wrong length.
    """
    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes)) else list(file_pattern)
    paths = sorted(
        {
            p
            for pat in patterns
            for p in gfile.glob(pat.decode() if isinstance(pat, bytes) else pat)
        }
    )
    if not paths:
        raise ValueError(f"No files match `file_pattern` {file_pattern}.")
    if column_names is None:
        if not header:
            raise ValueError("Cannot infer column names without a header line.")
        heads = []
        for p in paths:
            heads.append(next(_rows(p, field_delim, use_quote_delim, encoding), []))
        if any(h != heads[0] for h in heads):
            raise ValueError("Files have different column names in the header row.")
        column_names = heads[0]
    column_names = list(column_names)
    if len(set(column_names)) != len(column_names):
        raise ValueError("Cannot have duplicate column names.")
    select = None
    if select_columns is not None:
        select = []
        for c in select_columns:
            if isinstance(c, str):
                if c not in column_names:
                    raise ValueError(f"Column {c} is not in column_names.")
                select.append(column_names.index(c))
            else:
                select.append(int(c))
        select = sorted(select)
        if any(i < 0 or i >= len(column_names) for i in select):
            raise ValueError("select_columns is out of range.")
        column_names = [column_names[i] for i in select]
    if label_name is not None and label_name not in column_names:
        raise ValueError("`label_name` provided must be one of the columns.")
    if column_defaults is None:
        types = _infer_types(
            paths, len(column_names), select, field_delim, use_quote_delim, na_value,
            header, num_rows_for_inference, encoding,
        )  # fmt: skip
        column_defaults = [
            ops.convert_to_tensor([""] if t == dtypes.string else np.zeros(1, t.as_numpy_dtype))
            for t in types
        ]
    if len(column_defaults) != len(column_names):
        raise ValueError(
            f"column_defaults has {len(column_defaults)} entries but there are "
            f"{len(column_names)} columns."
        )

    def file_records(path):
        ds = CsvDataset(
            path,
            column_defaults,
            compression_type=compression_type,
            header=header,
            field_delim=field_delim,
            use_quote_delim=use_quote_delim,
            na_value=na_value,
            select_cols=select,
        )
        return ds.ignore_errors() if ignore_errors else ds

    files = Dataset.from_tensor_slices(paths)
    if shuffle:
        files = files.shuffle(len(paths), seed=shuffle_seed)
    ds = files.interleave(file_records, cycle_length=num_parallel_reads or 1)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=num_epochs is None)

    def to_dict(*columns):
        features = collections.OrderedDict(zip(column_names, columns))  # (TF's type)
        if label_name is None:
            return features
        label = features.pop(label_name)
        return features, label

    ds = ds.map(to_dict)
    return ds.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)
