"""Check that TensorFlow reads the files asyncflow writes, and computes the same numbers.

Two halves, two interpreters (TF is never a dependency of asyncflow or its tests):
  .venv/bin/python tools/check_asyncflow_files_in_tf.py write DIR    # asyncflow writes
  /work/tfvenv/bin/python tools/check_asyncflow_files_in_tf.py check DIR   # TF 2.21 reads
`write` leaves in DIR a GraphDef (binary and text), a training checkpoint with its
meta graph, a SavedModel with a serving signature, a SavedModel with an asset its main
op reads, a frozen graph, and expected.json with asyncflow's numbers; `check` loads each
with TF's own APIs (tf.import_graph_def, tf.train.import_meta_graph + Saver.restore,
tf.train.load_checkpoint, tf.saved_model.loader.load) and compares.  The result is
recorded in docs/FORMATS.md.
"""

import json
import os
import sys

import numpy as np

X = np.array([[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]], np.float32)


def write(out: str) -> None:
    import asyncflow as af

    os.makedirs(out, exist_ok=True)
    expected = {}
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.constant(np.arange(6, dtype=np.float32).reshape(3, 2) / 4 - 0.5, name="w")
        y = af.nn.relu(af.matmul(x, w) + af.constant([0.1, -0.2]), name="y")
        af.reduce_sum(y, axis=1, name="z")
        af.train.write_graph(g, out, "graph.pb", as_text=False)
        af.train.write_graph(g, out, "graph.pbtxt", as_text=True)
        with af.Session() as sess:
            expected["graph"] = {"z": sess.run("z:0", {x: X}).tolist()}

    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), name="dense/w")
        b = af.Variable([0.5, -0.5], name="dense/b")
        step = af.train.get_or_create_global_step()
        word = af.Variable(b"hello", name="word")
        loss = af.reduce_mean(af.square(af.matmul(x, w) + b), name="loss")
        train = af.train.AdamOptimizer(0.1).minimize(loss, global_step=step, name="train")
        saver = af.train.Saver()
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for _ in range(3):
                sess.run(train, {x: X})
            path = saver.save(sess, os.path.join(out, "ckpt", "model.ckpt"), global_step=step)
            sess.run(train, {x: X})
            expected["checkpoint"] = {
                "prefix": os.path.relpath(path, out),
                "w": sess.run(w).tolist(),
                "loss_after_one_more_step": float(sess.run(loss, {x: X})),
            }
            saver.restore(sess, path)
            expected["checkpoint"]["w"] = sess.run(w).tolist()
            expected["checkpoint"]["word"] = sess.run(word).decode()

    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 3], name="x")
        w = af.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), name="w")
        y = af.nn.relu(af.matmul(x, w), name="y")
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            af.saved_model.simple_save(sess, os.path.join(out, "saved_model"), {"x": x}, {"y": y})
            expected["saved_model"] = {"y": sess.run(y, {x: X}).tolist()}
            frozen = af.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), ["y"])
            af.train.write_graph(frozen, out, "frozen.pb", as_text=False)

    # A SavedModel with an asset: its main op reads the asset's file through the asset
    # tensor, which a loader feeds with the file's path under assets/.  The source file
    # is removed after export, so only the copy under assets/ can be read.
    source = os.path.join(out, "vocab_source.txt")
    with open(source, "w") as f:
        f.write("alpha\nbeta\n")
    g = af.Graph()
    with g.as_default():
        vocab = af.constant(source, name="vocab_path")
        af.add_to_collection(af.GraphKeys.ASSET_FILEPATHS, vocab)
        contents = af.Variable(b"", name="vocab_contents", trainable=False)
        main_op = af.assign(contents, af.read_file(vocab), name="read_vocab")
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            builder = af.saved_model.Builder(os.path.join(out, "saved_model_assets"))
            sig = af.saved_model.build_signature_def(
                {}, {"contents": af.saved_model.build_tensor_info(contents.value())}, "m"
            )
            builder.add_meta_graph_and_variables(
                sess,
                ["serve"],
                signature_def_map={"vocab": sig},
                assets_collection=af.get_collection(af.GraphKeys.ASSET_FILEPATHS),
                main_op=main_op,
            )
            builder.save()
    os.remove(source)
    with af.Graph().as_default() as g, af.Session(graph=g) as sess:
        mg = af.saved_model.loader.load(sess, ["serve"], os.path.join(out, "saved_model_assets"))
        out_name = mg.signature_def["vocab"].outputs["contents"].name
        expected["assets"] = {
            "contents": sess.run(out_name).decode(),
            "filenames": [a.filename for a in mg.asset_file_def],
        }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)


def check(out: str) -> int:
    import tensorflow.compat.v1 as tf

    tf.disable_eager_execution()
    tf.disable_resource_variables()
    with open(os.path.join(out, "expected.json")) as f:
        expected = json.load(f)
    results = []

    def report(what, ok, detail=""):
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {what} {detail}")

    for name in ("graph.pb", "graph.pbtxt"):
        gd = tf.GraphDef()
        raw = open(os.path.join(out, name), "rb").read()
        if name.endswith("txt"):
            from google.protobuf import text_format

            text_format.Parse(raw.decode(), gd)
        else:
            gd.ParseFromString(raw)
        with tf.Graph().as_default() as g:
            tf.import_graph_def(gd, name="")
            with tf.Session(graph=g) as sess:
                z = sess.run("z:0", {"x:0": X})
        err = float(np.abs(z - expected["graph"]["z"]).max())
        report(f"tf.import_graph_def({name})", err < 1e-6, f"max |dz| = {err:.2e}")

    ck = expected["checkpoint"]
    prefix = os.path.join(out, ck["prefix"])
    reader = tf.train.load_checkpoint(prefix)
    w = reader.get_tensor("dense/w")
    report(
        "tf.train.load_checkpoint",
        np.allclose(w, ck["w"], atol=1e-7) and reader.get_tensor("word") == b"hello",
        f"{len(reader.get_variable_to_shape_map())} tensors",
    )
    report("tf.train.latest_checkpoint", tf.train.latest_checkpoint(os.path.dirname(prefix))
           == prefix)  # fmt: skip
    with tf.Graph().as_default() as g:
        saver = tf.train.import_meta_graph(prefix + ".meta")
        with tf.Session(graph=g) as sess:
            saver.restore(sess, prefix)
            wv = sess.run("dense/w:0")
            train = g.get_operation_by_name("train")
            sess.run(train, {"x:0": X})
            loss = float(sess.run("loss:0", {"x:0": X}))
    report("tf.train.import_meta_graph + Saver.restore", np.allclose(wv, ck["w"], atol=1e-7))
    report(
        "one more Adam step in TF from our checkpoint and graph",
        abs(loss - ck["loss_after_one_more_step"]) < 1e-5,
        f"TF {loss:.7f} vs asyncflow {ck['loss_after_one_more_step']:.7f}",
    )
    gd = tf.GraphDef()
    gd.ParseFromString(open(os.path.join(out, "frozen.pb"), "rb").read())
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        with tf.Session(graph=g) as sess:
            y = sess.run("y:0", {"x:0": X})
    err = float(np.abs(y - expected["saved_model"]["y"]).max())
    report("tf.import_graph_def(frozen.pb from convert_variables_to_constants)", err < 1e-6,
           f"max |dy| = {err:.2e}")  # fmt: skip
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], os.path.join(out, "saved_model"))
        sig = mg.signature_def["serving_default"]
        y = sess.run(sig.outputs["y"].name, {sig.inputs["x"].name: X})
    err = float(np.abs(y - expected["saved_model"]["y"]).max())
    report("tf.saved_model.loader.load + serving_default", err < 1e-6, f"max |dy| = {err:.2e}")
    assets = expected["assets"]
    export_dir = os.path.join(out, "saved_model_assets")
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], export_dir)
        filenames = [a.filename for a in mg.asset_file_def]
        asset_tensor = mg.asset_file_def[0].tensor_info.name if filenames else None
        contents = sess.run(mg.signature_def["vocab"].outputs["contents"].name).decode()
    on_disk = [
        open(os.path.join(export_dir, "assets", name)).read() for name in filenames
    ]  # fmt: skip
    report(
        "SavedModel assets: asset_file_def, assets/ and the main op fed the asset's path",
        filenames == assets["filenames"] == ["vocab_source.txt"]
        and on_disk == [assets["contents"]]
        and contents == assets["contents"] == "alpha\nbeta\n"
        and asset_tensor == "vocab_path:0",
        f"{filenames} read {contents!r}",
    )
    return 0 if all(results) else 1


if __name__ == "__main__":
    mode, directory = sys.argv[1], sys.argv[2]
    if mode == "write":
        write(directory)
    else:
        sys.exit(check(directory))
