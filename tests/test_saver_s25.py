"""A Saver whose build is deferred (as the Estimator adds one) is left out of an
exported meta graph's "savers" collection without a warning, as TF 2.21 skips a
SaverDef it does not have yet."""

import logging

import asyncflow as af


def test_deferred_saver_is_skipped_quietly(caplog):
    with af.Graph().as_default():
        af.Variable(1.0)
        saver = af.train.Saver(defer_build=True)
        af.add_to_collection("savers", saver)
        assert saver.to_proto() is None
        with caplog.at_level(logging.WARNING):
            meta = af.train.export_meta_graph()
        assert "Issue encountered" not in caplog.text
        assert len(meta.collection_def["savers"].bytes_list.value) == 0
        saver.build()
        assert len(af.train.export_meta_graph().collection_def["savers"].bytes_list.value) == 1
