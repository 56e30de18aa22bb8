"""tf.train's queue input producers fed by `match_filenames_once` (a local variable),
and that variable's names, as TF 2.21 builds them (recorded from TF)."""

import asyncflow as af


def test_string_input_producer_takes_match_filenames_once(tmp_path):
    for i in range(2):
        (tmp_path / f"f{i}.csv").write_text(f"{i},1\n{i},2\n")
    with af.Graph().as_default():
        files = af.train.match_filenames_once(str(tmp_path / "f*.csv"))
        assert (files.name, files.initializer.name) == (
            "matching_filenames:0",
            "matching_filenames/Assign",
        )
        queue = af.train.string_input_producer(files, shuffle=False, num_epochs=1)
        _, value = af.TextLineReader().read(queue)
        a, b = af.decode_csv(value, [[0], [0]])
        batch = af.train.batch([a, b], 3, allow_smaller_final_batch=True)
        with af.Session() as sess:
            sess.run([af.global_variables_initializer(), af.local_variables_initializer()])
            coord = af.train.Coordinator()
            threads = af.train.start_queue_runners(sess, coord)
            got = [[x.tolist() for x in sess.run(batch)] for _ in range(2)]
            coord.request_stop()
            coord.join(threads)
    assert got == [[[0, 0, 1], [1, 2, 1]], [[1], [2]]]
