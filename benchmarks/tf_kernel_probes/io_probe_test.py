"""reader and parsing behaviours, condensed from what TF's kernel tests check; written
for the measurement, graph mode."""

import gzip
import os
import zlib

import numpy as np
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow.python.framework import constant_op, dtypes, errors_impl, test_util
from tensorflow.python.lib.io import tf_record
from tensorflow.python.ops import data_flow_ops, io_ops, parsing_ops, string_ops
from tensorflow.python.platform import test


def _example(**feats):
    f = {}
    for k, v in feats.items():
        if isinstance(v[0], bytes):
            f[k] = feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=v))
        elif isinstance(v[0], float):
            f[k] = feature_pb2.Feature(float_list=feature_pb2.FloatList(value=v))
        else:
            f[k] = feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=v))
    return example_pb2.Example(features=feature_pb2.Features(feature=f)).SerializeToString()


class ReaderProbe(test.TestCase):
    def _write_lines(self, n_files, n_lines, crlf=False):
        files = []
        for i in range(n_files):
            fn = os.path.join(self.get_temp_dir(), f"t{i}.txt")
            with open(fn, "wb") as f:
                for j in range(n_lines):
                    f.write(b"%d:%d" % (i, j) + (b"\r\n" if crlf else b"\n"))
            files.append(fn)
        return files

    @test_util.run_deprecated_v1
    def testTextLineReaderCRLFAndHeader(self):
        files = self._write_lines(2, 3, crlf=True)
        reader = io_ops.TextLineReader(skip_header_lines=1, name="r")
        q = data_flow_ops.FIFOQueue(99, [dtypes.string], shapes=())
        key, value = reader.read(q)
        self.evaluate(q.enqueue_many([files]))
        self.evaluate(q.close())
        got = [self.evaluate([key, value]) for _ in range(4)]
        self.assertEqual([b"0:1", b"0:2", b"1:1", b"1:2"], [v for _, v in got])
        self.assertEqual(f"{files[0]}:3".encode(), got[1][0])
        with self.assertRaisesOpError("is closed and has insufficient elements"):
            self.evaluate([key, value])

    @test_util.run_deprecated_v1
    def testReadUpTo(self):
        files = self._write_lines(1, 5)
        reader = io_ops.TextLineReader()
        q = data_flow_ops.FIFOQueue(99, [dtypes.string], shapes=())
        k, v = reader.read_up_to(q, 3)
        self.evaluate(q.enqueue_many([files]))
        self.evaluate(q.close())
        self.assertEqual(3, len(self.evaluate(v)))
        self.assertEqual(2, len(self.evaluate(v)))

    @test_util.run_deprecated_v1
    def testIdentityReaderStateAndCounts(self):
        reader = io_ops.IdentityReader("test_reader")
        work_completed = reader.num_work_units_completed()
        produced = reader.num_records_produced()
        q = data_flow_ops.FIFOQueue(99, [dtypes.string], shapes=())
        k, v = reader.read(q)
        self.evaluate(q.enqueue_many([["A", "B"]]))
        self.assertAllEqual([b"A", b"A"], self.evaluate([k, v]))
        self.assertEqual(1, self.evaluate(produced))
        self.assertEqual(1, self.evaluate(work_completed))
        state = self.evaluate(reader.serialize_state())
        self.evaluate(reader.reset())
        self.assertEqual(0, self.evaluate(produced))
        self.evaluate(reader.restore_state(state))
        self.assertEqual(1, self.evaluate(produced))

    @test_util.run_deprecated_v1
    def testWholeFileReader(self):
        files = self._write_lines(2, 2)
        reader = io_ops.WholeFileReader()
        q = data_flow_ops.FIFOQueue(99, [dtypes.string], shapes=())
        k, v = reader.read(q)
        self.evaluate(q.enqueue_many([files]))
        self.assertEqual(b"0:0\n0:1\n", self.evaluate(v))

    @test_util.run_deprecated_v1
    def testFixedLengthHeaderFooterHop(self):
        fn = os.path.join(self.get_temp_dir(), "fl.bin")
        with open(fn, "wb") as f:
            f.write(b"HH" + b"aabbccd" + b"FFF")
        reader = io_ops.FixedLengthRecordReader(
            record_bytes=2, header_bytes=2, footer_bytes=3, hop_bytes=2
        )
        q = data_flow_ops.FIFOQueue(99, [dtypes.string], shapes=())
        k, v = reader.read(q)
        self.evaluate(q.enqueue_many([[fn]]))
        self.evaluate(q.close())
        self.assertEqual([b"aa", b"bb", b"cc"], [self.evaluate(v) for _ in range(3)])

    @test_util.run_deprecated_v1
    def testFixedLengthGzip(self):
        fn = os.path.join(self.get_temp_dir(), "fl.gz")
        with gzip.GzipFile(fn, "wb") as f:
            f.write(b"abcdef")
        reader = io_ops.FixedLengthRecordReader(record_bytes=3, encoding="GZIP")
        q = data_flow_ops.FIFOQueue(99, [dtypes.string], shapes=())
        k, v = reader.read(q)
        self.evaluate(q.enqueue_many([[fn]]))
        self.assertEqual(b"abc", self.evaluate(v))

    @test_util.run_deprecated_v1
    def testTFRecordReaderCompressed(self):
        fn = os.path.join(self.get_temp_dir(), "r.tfrecord")
        opts = tf_record.TFRecordOptions(tf_record.TFRecordCompressionType.ZLIB)
        with tf_record.TFRecordWriter(fn, options=opts) as w:
            for i in range(3):
                w.write(b"rec%d" % i)
        reader = io_ops.TFRecordReader(name="tfr", options=opts)
        q = data_flow_ops.FIFOQueue(99, [dtypes.string], shapes=())
        k, v = reader.read(q)
        self.evaluate(q.enqueue_many([[fn]]))
        self.assertEqual(b"rec0", self.evaluate(v))
        self.assertEqual(
            f"{fn}:20".encode(), self.evaluate(k)
        )  # offset in the uncompressed stream

    @test_util.run_deprecated_v1
    def testTFRecordTruncated(self):
        fn = os.path.join(self.get_temp_dir(), "t.tfrecord")
        with tf_record.TFRecordWriter(fn) as w:
            w.write(b"abcdefgh")
            w.write(b"ijklmnop")
        with open(fn, "rb") as f:
            data = f.read()
        with open(fn, "wb") as f:
            f.write(data[:-5])
        reader = io_ops.TFRecordReader()
        q = data_flow_ops.FIFOQueue(99, [dtypes.string], shapes=())
        k, v = reader.read(q)
        self.evaluate(q.enqueue_many([[fn]]))
        self.evaluate(q.close())
        self.assertEqual(b"abcdefgh", self.evaluate(v))
        with self.assertRaises(errors_impl.DataLossError):
            self.evaluate(v)

    @test_util.run_deprecated_v1
    def testReadFileMatchingFiles(self):
        files = self._write_lines(2, 1)
        self.assertEqual(b"0:0\n", self.evaluate(io_ops.read_file(files[0])))
        m = self.evaluate(io_ops.matching_files(os.path.join(self.get_temp_dir(), "t*.txt")))
        self.assertEqual(2, len(m))


class ParseProbe(test.TestCase):
    @test_util.run_deprecated_v1
    def testParseExampleDenseSparse(self):
        ser = [_example(a=[1, 2], s=[b"x"]), _example(a=[3, 4])]
        out = parsing_ops.parse_example(
            ser,
            {
                "a": parsing_ops.FixedLenFeature([2], dtypes.int64),
                "s": parsing_ops.VarLenFeature(dtypes.string),
                "d": parsing_ops.FixedLenFeature([], dtypes.float32, default_value=-1.0),
            },
        )
        v = self.evaluate(out)
        self.assertAllEqual([[1, 2], [3, 4]], v["a"])
        self.assertAllEqual([[0, 0]], v["s"].indices)
        self.assertAllEqual([2, 1], v["s"].dense_shape)
        self.assertAllEqual([-1.0, -1.0], v["d"])

    @test_util.run_deprecated_v1
    def testParseMissingRequired(self):
        ser = [_example(b=[1])]
        out = parsing_ops.parse_example(ser, {"a": parsing_ops.FixedLenFeature([1], dtypes.int64)})
        with self.assertRaisesOpError("Feature: a \\(data type: int64\\) is required"):
            self.evaluate(out)

    @test_util.run_deprecated_v1
    def testParseWrongType(self):
        ser = [_example(a=[1.0])]
        out = parsing_ops.parse_example(ser, {"a": parsing_ops.FixedLenFeature([1], dtypes.int64)})
        with self.assertRaisesOpError("Data types don't match"):
            self.evaluate(out)

    @test_util.run_deprecated_v1
    def testParseWrongCount(self):
        ser = [_example(a=[1, 2, 3])]
        out = parsing_ops.parse_example(ser, {"a": parsing_ops.FixedLenFeature([2], dtypes.int64)})
        with self.assertRaisesOpError("Number of int64 values != expected"):
            self.evaluate(out)

    @test_util.run_deprecated_v1
    def testParseSequenceExample(self):
        se = example_pb2.SequenceExample()
        se.context.feature["c"].int64_list.value.append(5)
        for i in range(3):
            se.feature_lists.feature_list["f"].feature.add().float_list.value.extend(
                [float(i), float(i)]
            )
        ctx, seq = parsing_ops.parse_single_sequence_example(
            se.SerializeToString(),
            context_features={"c": parsing_ops.FixedLenFeature([], dtypes.int64)},
            sequence_features={"f": parsing_ops.FixedLenSequenceFeature([2], dtypes.float32)},
        )
        c, s = self.evaluate([ctx, seq])
        self.assertEqual(5, c["c"])
        self.assertAllEqual([[0, 0], [1, 1], [2, 2]], s["f"])

    @test_util.run_deprecated_v1
    def testFixedLenSequenceAllowMissing(self):
        ser = [_example(a=[1, 2]), _example(a=[3])]
        out = parsing_ops.parse_example(
            ser, {"a": parsing_ops.FixedLenSequenceFeature([], dtypes.int64, allow_missing=True)}
        )
        self.assertAllEqual([[1, 2], [3, 0]], self.evaluate(out["a"]))

    @test_util.run_deprecated_v1
    def testDecodeCSV(self):
        rec = ["1,2.5,a", "3,,b"]
        a, b, c = parsing_ops.decode_csv(rec, [[0], [9.0], [""]])
        self.assertAllEqual([1, 3], self.evaluate(a))
        self.assertAllClose([2.5, 9.0], self.evaluate(b))
        with self.assertRaisesOpError("Field 0 is required but missing in record 0!"):
            self.evaluate(
                parsing_ops.decode_csv([",1"], [constant_op.constant([], dtypes.int32), [0]])
            )

    @test_util.run_deprecated_v1
    def testDecodeCSVQuoteAndSelect(self):
        out = parsing_ops.decode_csv(['"a,b",2,3'], [[""], [0]], select_cols=[0, 2])
        self.assertAllEqual([b"a,b"], self.evaluate(out[0]))
        self.assertAllEqual([3], self.evaluate(out[1]))
        with self.assertRaisesOpError("Quote inside a string has to be escaped by another quote"):
            self.evaluate(parsing_ops.decode_csv(['"a"b",2'], [[""], [0]]))

    @test_util.run_deprecated_v1
    def testDecodeRawFixedLength(self):
        out = parsing_ops.decode_raw([b"\x01\x02\x03", b"\x04"], dtypes.uint8, fixed_length=4)
        self.assertAllEqual([[1, 2, 3, 0], [4, 0, 0, 0]], self.evaluate(out))
        with self.assertRaisesOpError(
            "Input to DecodeRaw has length 3 that is not a multiple of 2"
        ):
            self.evaluate(parsing_ops.decode_raw([b"\x01\x02\x03"], dtypes.int16))

    @test_util.run_deprecated_v1
    def testStringToNumber(self):
        self.assertAllClose(
            [16.0, 8.0, 1.5], self.evaluate(string_ops.string_to_number(["0x10", "0x1p3", "1.5"]))
        )
        with self.assertRaisesOpError("StringToNumberOp could not correctly convert string"):
            self.evaluate(string_ops.string_to_number(["1.5"], out_type=dtypes.int32))

    @test_util.run_deprecated_v1
    def testParseTensorAndJSON(self):
        from tensorflow.python.framework import tensor_util

        proto = tensor_util.make_tensor_proto(np.array([1.0, 2.0], np.float32))
        t = parsing_ops.parse_tensor(proto.SerializeToString(), dtypes.float32)
        self.assertAllEqual([1.0, 2.0], self.evaluate(t))
        with self.assertRaisesOpError("Type mismatch between parsed tensor"):
            self.evaluate(parsing_ops.parse_tensor(proto.SerializeToString(), dtypes.int32))

    @test_util.run_deprecated_v1
    def testDecodeCompressed(self):
        raw = zlib.compress(b"hello")
        self.assertEqual(b"hello", self.evaluate(parsing_ops.decode_compressed([raw], "ZLIB"))[0])


if __name__ == "__main__":
    test.main()
