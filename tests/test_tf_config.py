"""`tf.config` as TF 2.21's compat.v1 graph mode behaves (recorded from TF): the
settings are the defaults of Sessions made without a ConfigProto."""

import pytest

import asyncflow as af
from asyncflow import device_config


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch):
    monkeypatch.setattr(device_config, "_state", device_config._State())


def test_devices_and_a_split_cpu():
    assert af.config.list_physical_devices() == [
        af.config.PhysicalDevice(name="/physical_device:CPU:0", device_type="CPU")
    ]
    cpu = af.config.list_physical_devices("CPU")[0]
    two = [af.config.LogicalDeviceConfiguration(), af.config.LogicalDeviceConfiguration()]
    af.config.set_logical_device_configuration(cpu, two)
    assert af.config.get_logical_device_configuration(cpu) == two
    with af.Graph().as_default():
        with af.device("/cpu:1"):
            x = af.constant(1.0) + 1
        with af.Session() as sess:
            assert [d.name for d in sess.list_devices()] == [
                "/job:localhost/replica:0/task:0/device:CPU:0",
                "/job:localhost/replica:0/task:0/device:CPU:1",
            ]
            assert sess.run(x) == 2.0
        # a ConfigProto of one's own is used as it is
        with af.Session(config=af.ConfigProto()) as sess:
            assert len(sess.list_devices()) == 1
    assert af.config.list_logical_devices("CPU") == [
        af.config.LogicalDevice("/device:CPU:0", "CPU"),
        af.config.LogicalDevice("/device:CPU:1", "CPU"),
    ]
    with pytest.raises(RuntimeError, match="^Virtual devices cannot be modified after being"):
        af.config.set_logical_device_configuration(cpu, two[:1])
    with pytest.raises(ValueError, match="memory limit on CPU virtual devices"):
        device_config._state.initialized = False
        af.config.set_logical_device_configuration(
            cpu, [af.config.LogicalDeviceConfiguration(memory_limit=5)]
        )


def test_threads_and_soft_placement_become_session_defaults():
    assert af.config.threading.get_intra_op_parallelism_threads() == 0
    assert af.config.get_soft_device_placement() is False
    af.config.threading.set_intra_op_parallelism_threads(1)
    af.config.threading.set_inter_op_parallelism_threads(3)
    af.config.set_soft_device_placement(True)
    with af.Graph().as_default(), af.Session() as sess:
        c = sess._config
        assert (c.intra_op_parallelism_threads, c.inter_op_parallelism_threads) == (1, 3)
        assert c.allow_soft_placement is True
    af.config.list_logical_devices()
    af.config.threading.set_intra_op_parallelism_threads(1)  # unchanged: allowed
    with pytest.raises(RuntimeError, match="^Intra op parallelism cannot be modified after"):
        af.config.threading.set_intra_op_parallelism_threads(2)


def test_experimental_and_optimizer():
    cpu = af.config.list_physical_devices("CPU")[0]
    with pytest.raises(ValueError, match="^Cannot set memory growth on non-GPU and non-Pluggable"):
        af.config.experimental.set_memory_growth(cpu, True)
    assert af.config.experimental.get_memory_info("CPU:0") == {"current": 0, "peak": 0}
    assert af.config.experimental.get_device_details(cpu) == {}
    assert af.config.experimental.tensor_float_32_execution_enabled() is True
    assert af.config.experimental.get_synchronous_execution() is True
    assert af.config.experimental.get_device_policy() == "silent"
    assert af.config.optimizer.get_jit() == ""
    af.config.optimizer.set_jit(True)
    assert af.config.optimizer.get_jit() == "autoclustering"
    af.config.optimizer.set_experimental_options({"constant_folding": False})
    assert af.config.optimizer.get_experimental_options() == {
        "constant_folding": False,
        "disable_model_pruning": False,
        "disable_meta_optimizer": False,
    }
    assert af.config.get_visible_devices("GPU") == []


def test_hiding_the_cpu_fails_where_tf_does():
    af.config.set_visible_devices([])
    with pytest.raises(af.errors.NotFoundError, match="No CPU devices are available"):
        af.config.list_logical_devices()


def test_stand_in_gpus_visible_and_hidden(monkeypatch):
    monkeypatch.setenv("ASYNCFLOW_FAKE_GPUS", "2")
    gpus = af.config.list_physical_devices("GPU")
    assert [g.name for g in gpus] == ["/physical_device:GPU:0", "/physical_device:GPU:1"]
    af.config.experimental.set_memory_growth(gpus[0], True)
    assert af.config.experimental.get_memory_growth(gpus[0]) is True
    af.config.set_visible_devices(gpus[1:], "GPU")
    assert af.config.get_visible_devices("GPU") == gpus[1:]
    config = device_config.session_config()
    assert config.gpu_options.visible_device_list == "1"
    assert config.gpu_options.allow_growth is True
    assert [d.name for d in af.config.list_logical_devices("GPU")] == ["/device:GPU:0"]
    af.config.experimental.get_memory_info("GPU:0")  # the pool's counters, no error
