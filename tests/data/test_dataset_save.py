"""Dataset.save / load / snapshot in TF's on-disk format against TF 2.21
(tests/fixtures/record_data_save_tf.py): TF's saved files (tests/fixtures/data_save/)
load here to TF's elements, spec and cardinality; the files saved here are TF's bytes
(records, metadata, dataset_spec.pb) and TF loads them to the same elements; TF's errors
and snapshot passes; the snappy coder on TF's blocks and on bad input."""

import glob
import json
import os
import pathlib
import shutil
import sys

import numpy as np
import pytest

import asyncflow as af
from asyncflow import errors
from asyncflow import snapshot_format as sf
from asyncflow.data import saving

pytestmark = pytest.mark.timeout(120)

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import data_save_cases as cases  # noqa: E402
from data_save_cases import plain  # noqa: E402

TF = json.loads((FIXTURES / "data_save_tf.json").read_text())
SAVED = FIXTURES / "data_save"
D = af.data.Dataset


def drain(sess, ds, limit=100):
    nxt = ds.make_one_shot_iterator().get_next()
    elems, end = [], None
    while len(elems) < limit:
        try:
            elems.append(plain(sess.run(nxt)))
        except errors.OutOfRangeError:
            break
        except errors.OpError as e:
            end = {"error": type(e).__name__, "message": e.message}
            break
    return {"elements": elems, "end": end}


def loaded(sess, path, compression, reader=None):
    ds = D.load(str(path), compression=compression, reader_func=reader)
    out = drain(sess, ds)
    out["spec"] = cases.spec_text(af, ds.element_spec)
    out["cardinality"] = int(sess.run(af.data.experimental.cardinality(ds)))
    return out


@pytest.mark.parametrize("name", sorted(cases.CASES))
@pytest.mark.parametrize("reader", ["flat", "default"])
def test_tf_saved_loads_as_tf(sess, monkeypatch, name, reader):
    monkeypatch.setattr(saving, "_cpu_count", lambda: TF["cpu_count"])
    fn = cases.flat_reader if reader == "flat" else None
    got = loaded(sess, SAVED / name, cases.CASES[name][2], fn)
    assert got == TF["tf_saved"][name][reader]


def _save_here(sess, name, out):
    build, kwargs, _ = cases.CASES[name]
    op = build(af).save(str(out), **kwargs(af))
    sess.run(op)
    return op


def _files(root) -> dict:
    """Relative shard file names (run id left out) -> bytes."""
    out = {}
    for f in glob.glob(f"{root}/*/*.shard/*.snapshot"):
        parts = pathlib.Path(f).parts
        out["/".join(parts[-2:])] = pathlib.Path(f).read_bytes()
    return out


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_saved_here_is_tfs_format(sess, tmp_path, name):
    """The same shards, records, dataset_spec.pb and metadata fields as TF's files
    (compressed files compared decompressed), and TF reads them to its own elements."""
    comp = cases.CASES[name][2]
    _save_here(sess, name, tmp_path / name)
    ours, theirs = _files(tmp_path / name), _files(SAVED / name)
    assert sorted(ours) == sorted(theirs)
    for k in ours:
        assert sf.decompress(ours[k], comp or "") == sf.decompress(theirs[k], comp or "")
        if not comp:
            assert ours[k] == theirs[k]
    spec = (tmp_path / name / sf.SPEC_FILE).read_bytes()
    tf_spec = (SAVED / name / sf.SPEC_FILE).read_bytes()
    assert sf.decode_spec(spec) == sf.decode_spec(tf_spec)
    if "dict" not in name:  # (a map's entries are in the order of TF's proto runtime)
        assert spec == tf_spec
    md = sf.decode_metadata((tmp_path / name / sf.METADATA_FILE).read_bytes())
    want = sf.decode_metadata((SAVED / name / sf.METADATA_FILE).read_bytes())
    for k in ("graph_hash", "version", "dtype", "num_elements", "finalized"):
        assert md[k] == want[k]
    assert os.path.isdir(tmp_path / name / md["run_id"])
    assert TF["tf_reads_ours"][name] == TF["tf_saved"][name]["flat"]


@pytest.mark.parametrize("comp", [None, "GZIP", "ZLIB", "SNAPPY"])
def test_round_trip_many_elements(sess, tmp_path, comp):
    """More elements than one write holds and than one snappy block: every element back,
    strings and floats bit-exact, shards by shard_func."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3000, 5)).astype(np.float32)
    words = np.array([b"w%d" % i * (i % 7) for i in range(3000)], dtype=object)
    ds = D.from_tensor_slices((x, words))
    sess.run(
        ds.save(str(tmp_path), compression=comp, shard_func=lambda a, b: af.constant(0, af.int64))
    )
    back = D.load(str(tmp_path), compression=comp, reader_func=cases.flat_reader)
    nxt = back.batch(1000).make_one_shot_iterator().get_next()
    got = [sess.run(nxt) for _ in range(3)]
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), x)
    assert list(np.concatenate([g[1] for g in got])) == list(words)


def test_experimental_save_load(sess, tmp_path):
    ds = D.range(4)
    sess.run(af.data.experimental.save(ds, str(tmp_path)))
    back = af.data.experimental.load(str(tmp_path), af.TensorSpec([], af.int64))
    assert [e["value"][0] for e in drain(sess, back)["elements"]] == [0, 1, 2, 3]


def test_load_without_spec_file():
    want = TF["errors"]["load_no_spec"]
    with pytest.raises(errors.NotFoundError) as e:
        D.load("/nonexistent-asyncflow/nowhere")
    assert e.value.message == want["message"].replace("DIR", "/nonexistent-asyncflow")


def test_load_without_metadata(sess, tmp_path):
    want = TF["errors"]["load_no_metadata"]
    got = drain(sess, D.load(str(tmp_path / "nowhere"), element_spec=af.TensorSpec([], af.int64)))
    assert got["end"]["error"] == want["end"]["error"]
    assert got["end"]["message"].startswith(want["end"]["message"].replace("DIR", str(tmp_path)))


def test_save_shard_func_not_int64(sess, tmp_path):
    want = TF["errors"]["save_float_shard"]
    op = D.range(3).save(str(tmp_path), shard_func=lambda x: af.cast(x, af.float32))
    with pytest.raises(getattr(errors, want["error"])) as e:
        sess.run(op)
    assert want["message"] in e.value.message


def test_snapshot_shard_func_not_int64(tmp_path):
    want = TF["errors"]["snapshot_float_shard"]
    with pytest.raises(TypeError) as e:
        D.range(3).snapshot(str(tmp_path), shard_func=lambda x: af.cast(x, af.float32))
    assert str(e.value) == want["message"]


def test_gzip_read_as_plain(sess):
    want = TF["errors"]["gzip_read_plain"]
    got = loaded(sess, SAVED / "gzip", None)
    assert got["end"]["error"] == want["end"]["error"]
    assert want["end"]["message"] in got["end"]["message"]


def test_snapshot_passes(tmp_path):
    """A pass stopped early leaves an unfinished run (the next pass writes again); a
    finished snapshot is read by later passes, also of the pipeline built again."""
    want = TF["snapshot"]
    passes = []
    for limit in (2, 100, 100):
        with af.Graph().as_default(), af.Session() as s:
            ds = D.range(6).map(lambda x: x * 10)
            ds = ds.apply(af.data.experimental.snapshot(str(tmp_path / "a")))
            passes.append(drain(s, ds, limit)["elements"])
    assert passes == want["passes"]
    hashes = os.listdir(tmp_path / "a")
    assert len(hashes) == want["hash_dirs"]
    assert (
        len([x for x in os.listdir(tmp_path / "a" / hashes[0]) if x.isdigit()]) == want["run_dirs"]
    )


def test_snapshot_custom_functions_reads_back(tmp_path):
    runs = []
    for _ in range(2):
        with af.Graph().as_default(), af.Session() as s:
            ds = D.range(8).snapshot(
                str(tmp_path / "b"),
                compression="GZIP",
                shard_func=lambda x: x % 3,
                reader_func=cases.flat_reader,
            )
            runs.append(drain(s, ds)["elements"])
    assert runs == TF["snapshot"]["custom"]


def test_snapshot_reads_not_the_input(tmp_path):
    """Once finished, the snapshot's elements are read even if the source changed."""
    src = tmp_path / "x.txt"
    src.write_text("a\nb\n")
    path = str(tmp_path / "snap")
    outs = []
    for text in ("a\nb\n", "c\nd\ne\n"):
        src.write_text(text)
        with af.Graph().as_default(), af.Session() as s:
            ds = af.data.TextLineDataset(str(src)).snapshot(path)
            outs.append([e["value"][0] for e in drain(s, ds)["elements"]])
    assert outs == [["a", "b"], ["a", "b"]]


def test_graph_hash_ignores_names():
    with af.Graph().as_default():
        a = D.range(5).map(lambda x: x + 1)
        b = D.range(5).map(lambda x: x + 1)
        c = D.range(5).map(lambda x: x + 2)
        assert saving.graph_hash(a._variant) == saving.graph_hash(b._variant)
        assert saving.graph_hash(a._variant) != saving.graph_hash(c._variant)


# -- the snappy coder --------------------------------------------------------------------------


def test_snappy_reads_tfs_copies():
    """TF's SNAPPY file of repetitive strings uses copy tags; its records decode to the
    elements TF reads."""
    (f,) = glob.glob(str(SAVED / "snappy/*/*.shard/*.snapshot"))
    data = pathlib.Path(f).read_bytes()
    raw = sf.snappy_decompress(data)
    assert len(raw) > len(data)  # it was compressed
    recs = sf.decode_records(raw)
    first = [sf.decode_tensor(r) for r in recs[:3]]
    assert first[0][()] == (b"abcabcab" * 3)[:20]
    assert first[1].shape == (2, 3) and first[2].dtype == np.bool_


def test_snappy_round_trip_and_bad_input():
    rng = np.random.default_rng(1)
    for n in (0, 1, 59, 60, 255, 256, 70000, 200000):
        data = rng.integers(0, 4, n, dtype=np.uint8).tobytes()
        assert sf.snappy_decompress(sf.snappy_compress(data)) == data
    # a copy before the start, a truncated block, a lying length
    for bad in (
        b"\x00\x00\x00\x03\x04\x05\x01",
        b"\x00\x00\x00\x09\x04",
        b"\x00\x00\x00\x02\x05\x00",
    ):
        with pytest.raises(errors.DataLossError):
            sf.snappy_decompress(bad)
    # an overlapping copy (offset 1, length 4) repeats the last byte
    block = bytes([5, 0 << 2, ord("a"), (0 << 2) | 1 | (0 << 5), 1])
    assert sf.snappy_decompress(len(block).to_bytes(4, "big") + block) == b"aaaaa"


def test_corrupt_record_crc(tmp_path, sess):
    shutil.copytree(SAVED / "none", tmp_path / "c")
    (f,) = glob.glob(str(tmp_path / "c/*/*.shard/*.snapshot"))
    data = bytearray(pathlib.Path(f).read_bytes())
    data[14] ^= 0xFF  # inside the first record's data
    pathlib.Path(f).write_bytes(bytes(data))
    got = drain(sess, D.load(str(tmp_path / "c")))
    assert got["end"]["error"] == "DataLossError"
