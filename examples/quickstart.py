"""The whitepaper's Figure 1 graph — relu(W x + b) and a cost — run two ways.

First synchronously, as a TF1 program would (`sess.run`), then awaited on an event
loop (`await sess.arun`), with many steps in flight at once.  Written against the
`tf.compat.v1` API: `import asyncflow as tf` is the only asyncflow-specific line.
"""

import asyncio

import numpy as np

import asyncflow as tf

tf.set_random_seed(1)
b = tf.Variable(tf.zeros([100]), name="b")  # 100-d vector, init to zeroes
W = tf.Variable(tf.random_uniform([784, 100], -1, 1), name="W")  # 784x100 matrix
x = tf.placeholder(tf.float32, [None, 784], name="x")  # placeholder for input
relu = tf.nn.relu(tf.matmul(x, W) + b)  # Relu(Wx+b)
C = tf.reduce_sum(tf.square(relu), name="C")  # cost computed as a function of Relu

rng = np.random.default_rng(0)
batches = [rng.random((32, 784), dtype=np.float32) for _ in range(8)]


def run_sync() -> list[float]:
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        costs = [float(sess.run(C, feed_dict={x: batch})) for batch in batches]
        # The NumPy reference: the same computation by hand, from the same weights.
        w_val, b_val = sess.run([W, b])
    ref = [float(np.sum(np.maximum(batch @ w_val + b_val, 0) ** 2)) for batch in batches]
    np.testing.assert_allclose(costs, ref, rtol=1e-4)
    return costs


async def run_async() -> list[float]:
    async with tf.Session() as sess:
        await sess.arun(tf.global_variables_initializer())
        # Every batch is a step in flight at once on this event loop.
        return [
            float(c)
            for c in await asyncio.gather(
                *(sess.arun(C, feed_dict={x: batch}) for batch in batches)
            )
        ]


if __name__ == "__main__":
    sync_costs = run_sync()
    print("sess.run   costs:", " ".join(f"{c:.1f}" for c in sync_costs))
    async_costs = asyncio.run(run_async())
    print("sess.arun  costs:", " ".join(f"{c:.1f}" for c in async_costs))
    assert np.allclose(sync_costs, async_costs, rtol=1e-4), "same seed, same numbers"
    print("sync and async steps agree; both match NumPy.")
