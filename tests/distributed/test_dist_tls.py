"""TLS on the wire (issue 15 item 2): tasks and clients configured with certificates from
a CA made in the test (trustme) step across tasks as over plain TCP; a peer that does not
speak TLS, does not trust the CA, lacks a client certificate where one is required, or
lacks the cluster secret is refused.  In-process servers on 127.0.0.1; reference: NumPy."""

import asyncio

import numpy as np
import pytest
from conftest import cluster_of

import asyncflow as af
from asyncflow.distributed import wire

# (a test extra; a checkout whose venv predates it skips rather than fails to collect)
trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server/client certificate for localhost and 127.0.0.1, and a second,
    untrusted CA's certificate for the same names (PEM files)."""
    d = tmp_path_factory.mktemp("pki")
    ca, other = trustme.CA(), trustme.CA()
    files = {}
    for name, authority in (("good", ca), ("rogue", other)):
        cert = authority.issue_cert("localhost", "127.0.0.1")
        files[name + "_cert"] = d / f"{name}_cert.pem"
        files[name + "_key"] = d / f"{name}_key.pem"
        cert.cert_chain_pems[0].write_to_path(files[name + "_cert"])
        for extra in cert.cert_chain_pems[1:]:
            extra.write_to_path(files[name + "_cert"], append=True)
        cert.private_key_pem.write_to_path(files[name + "_key"])
        files[name + "_ca"] = d / f"{name}_ca.pem"
        authority.cert_pem.write_to_path(files[name + "_ca"])
    return {k: str(v) for k, v in files.items()}


def _tls(pki, which="good", ca="good", client_auth=False, cert=True):
    return wire.TLSConfig(
        pki[which + "_cert"] if cert else None,
        pki[which + "_key"] if cert else None,
        pki[ca + "_ca"],
        client_auth=client_auth,
    )


def _use_tls(monkeypatch, pki, which="good", ca="good", cert=True):
    """The client side of this process: ASYNCFLOW_TLS_* as a deployment sets them."""
    if cert:
        monkeypatch.setenv("ASYNCFLOW_TLS_CERT_FILE", pki[which + "_cert"])
        monkeypatch.setenv("ASYNCFLOW_TLS_KEY_FILE", pki[which + "_key"])
    monkeypatch.setenv("ASYNCFLOW_TLS_CA_FILE", pki[ca + "_ca"])


@pytest.fixture(scope="module")
def tls_cluster(pki):
    cluster = cluster_of(ps=1, worker=1)
    cfg = _tls(pki, client_auth=True)  # mutual TLS between the tasks too
    servers = {(job, 0): af.train.Server(cluster, job, 0, tls=cfg) for job in ("ps", "worker")}
    yield cluster, servers
    for s in servers.values():
        s.stop()


def test_env_config():
    assert wire.tls_config() is None  # nothing set: plain TCP


def test_steps_across_tls_tasks_match_numpy(tls_cluster, pki, monkeypatch):
    _use_tls(monkeypatch, pki)
    cluster, servers = tls_cluster
    rng = np.random.RandomState(0)
    big = rng.randn(512, 1024).astype(np.float32)  # 2 MiB: a large frame's own buffer
    x_np = rng.randn(4, 512).astype(np.float32)
    with af.Graph().as_default():
        with af.device("/job:ps/task:0"):
            w = af.Variable(big, name="w")
        x = af.placeholder(af.float32, [None, 512])
        with af.device("/job:worker/task:0"):
            y = af.matmul(x, w)  # w crosses ps -> worker (a PUSH over the tasks' TLS)
            s = af.reduce_sum(w, axis=0)
        with af.Session(servers["worker", 0].target) as sess:
            sess.run(w.initializer)
            got_y, got_s, got_w = sess.run([y, s, w], {x: x_np})
            for server in servers.values():  # every connection the tasks accepted is TLS
                conns = list(server._service.connections)
                assert conns and all(c.transport.get_extra_info("ssl_object") for c in conns)
    np.testing.assert_allclose(got_y, x_np @ big, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_s, big.sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got_w, big)


async def test_a_plain_tcp_peer_is_refused(tls_cluster, monkeypatch):
    monkeypatch.setattr(wire, "HANDSHAKE_TIMEOUT", 1.0)
    _, servers = tls_cluster
    port = int(servers["ps", 0].target.rsplit(":", 1)[1])
    secret = wire.cluster_secret()
    with pytest.raises(af.errors.UnavailableError):
        conn = await wire.connect("127.0.0.1", port, secret, lambda *a: None, wait_s=5)
        conn.abort(af.errors.CancelledError(None, None, "unexpected"))


async def test_an_untrusted_server_certificate_is_refused(tls_cluster, pki):
    _, servers = tls_cluster
    port = int(servers["ps", 0].target.rsplit(":", 1)[1])
    tls = _tls(pki, which="good", ca="rogue")  # trusts only the other CA
    with pytest.raises(af.errors.UnavailableError, match="TLS|certificate"):
        await wire.connect(
            "127.0.0.1", port, wire.cluster_secret(), lambda *a: None, wait_s=5, tls=tls
        )


async def test_mutual_tls_needs_a_client_certificate_from_the_ca(tls_cluster, pki):
    _, servers = tls_cluster
    port = int(servers["ps", 0].target.rsplit(":", 1)[1])
    secret = wire.cluster_secret()
    for bad in (_tls(pki, cert=False), _tls(pki, which="rogue", ca="good")):
        with pytest.raises(af.errors.UnavailableError):
            conn = await wire.connect(
                "127.0.0.1", port, secret, lambda *a: None, wait_s=5, tls=bad
            )
            # (TLS 1.3: the server checks the client's certificate after the client's
            # side of the handshake is done; the refusal arrives as the next read)
            await asyncio.wait_for(conn.call(wire.STATUS), 5)
    conn = await wire.connect("127.0.0.1", port, secret, lambda *a: None, wait_s=5, tls=_tls(pki))
    try:
        meta, _ = await asyncio.wait_for(conn.call(wire.STATUS), 5)
        assert meta["job"] == "ps"
        assert conn.transport.get_extra_info("ssl_object").version() in ("TLSv1.2", "TLSv1.3")
    finally:
        conn.abort(af.errors.CancelledError(None, None, "done"))


async def test_tls_does_not_replace_the_cluster_secret(tls_cluster, pki):
    _, servers = tls_cluster
    port = int(servers["ps", 0].target.rsplit(":", 1)[1])
    runs = servers["ps", 0]._service.runs
    # (refused at the hello: the server closes without a word, the client sees it go)
    with pytest.raises((af.errors.UnauthenticatedError, af.errors.UnavailableError)):
        await wire.connect("127.0.0.1", port, b"wrong", lambda *a: None, wait_s=5, tls=_tls(pki))
    assert servers["ps", 0]._service.runs == runs


def test_server_flags_and_env_build_the_same_config(pki, monkeypatch):
    from asyncflow import server as server_main

    args = server_main._args(
        ["--tls_cert", pki["good_cert"], "--tls_key", pki["good_key"], "--tls_ca",
         pki["good_ca"], "--tls_client_auth"]
    )  # fmt: skip
    assert server_main._tls(args) == _tls(pki, client_auth=True)
    _use_tls(monkeypatch, pki)
    monkeypatch.setenv("ASYNCFLOW_TLS_CLIENT_AUTH", "1")
    assert wire.tls_config() == _tls(pki, client_auth=True)
    assert server_main._tls(server_main._args([])) == wire.tls_config()
