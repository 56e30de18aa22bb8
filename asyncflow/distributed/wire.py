"""The wire protocol between tasks: authenticated connections carrying framed messages.

A connection starts with a mutual HMAC challenge-response over fixed-size hellos (the
cluster secret never crosses the wire):

  server -> client  b"AFH" version server_nonce[32] incarnation[8]           (44 bytes)
  client -> server  b"AFC" version client_nonce[32] HMAC(s, "c"+sn+cn)[32]   (68 bytes)
  server -> client  b"AFS" version HMAC(s, "s"+cn+sn)[32]                   (36 bytes)

Until the client's hello checks out, the server reads nothing beyond those 68 bytes and
parses nothing at all: an unauthenticated peer is refused before any request is read.

TLS, when configured (`TLSConfig`, from ASYNCFLOW_TLS_* or a Server's `tls=`), wraps
the TCP connection before any of this: the TLS handshake comes first (a server can also
require a client certificate: mutual TLS), then the same HMAC hellos run inside it, so
a peer needs both a trusted certificate and the cluster secret.  Without TLS the HMAC
authenticates but does not hide or protect the frames; on a network others share,
configure TLS.

Then both sides exchange frames: a fixed 20-byte header (magic b"AF", version, kind,
request id, meta length, payload length), a small JSON meta object (padded with spaces
to a multiple of 64 bytes, so the payload after it stays aligned), and a payload of raw
tensor bytes (each tensor 64-byte aligned).  Every length is checked against a bound
before anything is allocated.  Tensors go out as `writelines` of memoryviews of their
own buffers (no copy on our side) and come in through a BufferedProtocol: small frames
land in one reusable scratch buffer; a large one gets one preallocated body buffer the
socket reads straight into, and its tensors are views of it.

No pickle, no eval: meta is JSON checked field by field by its handler; tensors are
(dtype from a fixed table, shape, bytes); strings are lengths then bytes.

Invariants: a frame is dispatched only once complete; a connection that breaks the
protocol (bad magic, version, kind or size) is closed at once, with its pending calls
failed with UnavailableError.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import pathlib
import secrets
import socket
import ssl
import struct
import sys
import time
import weakref

import numpy as np

from asyncflow import errors
from asyncflow.kernel_api import DEAD
from asyncflow.ops.sendrecv_ops import _Lossy

__all__ = [
    "Connection",
    "TLSConfig",
    "cluster_secret",
    "decode_tensors",
    "encode_error",
    "encode_tensors",
    "error_from_meta",
    "tls_config",
]

VERSION = 1
MAGIC = b"AF"
HEADER = struct.Struct("<2sBBIIQ")  # magic, version, kind, request id, meta len, payload len
SERVER_HELLO = struct.Struct("<3sB32sQ")
CLIENT_HELLO = struct.Struct("<3sB32s32s")
SERVER_PROOF = struct.Struct("<3sB32s")

# Frame kinds.
PING, PONG, STATUS, REGISTER, DEREGISTER, RUN, ABORT, PUSH, REPLY, ERROR, RESET = range(1, 12)
_KINDS = frozenset(range(1, 12))

MAX_META = 64 << 20  # a registered graph's constants travel in meta-side payload
MAX_PAYLOAD = int(os.environ.get("ASYNCFLOW_MAX_MESSAGE_BYTES", str(8 << 30)))
MAX_TENSORS = 1 << 16
MAX_RANK = 64
HANDSHAKE_TIMEOUT = 5.0
_SCRATCH = 1 << 18  # frames whose body fits here are copied out of one reusable buffer
_ALIGN = 64
_PAD = bytes(_ALIGN)
_LITTLE = sys.byteorder == "little"


# -- the cluster secret ------------------------------------------------------------------


def cluster_secret() -> bytes:
    """The shared secret that authenticates every connection of a cluster.

    ASYNCFLOW_CLUSTER_SECRET, else the file ASYNCFLOW_CLUSTER_SECRET_FILE names (a
    Kubernetes secret mounted as a file), else ~/.asyncflow/cluster_secret, created
    with mode 0600 on first use (as Erlang's cookie: the processes of one user on one
    machine share it without configuration; a cluster over several machines sets one
    of the first two)."""
    value = os.environ.get("ASYNCFLOW_CLUSTER_SECRET")
    if value:
        return value.encode("utf-8")
    path = os.environ.get("ASYNCFLOW_CLUSTER_SECRET_FILE")
    if path:
        return pathlib.Path(path).read_bytes().strip()
    path = pathlib.Path.home() / ".asyncflow" / "cluster_secret"
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        token = secrets.token_hex(32).encode()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it meanwhile
            return path.read_bytes().strip()
        with os.fdopen(fd, "wb") as f:
            f.write(token)
        return token


# -- TLS ----------------------------------------------------------------------------------


class TLSConfig:
    """TLS for a task's connections: its server side and its client side.

    Args:
      cert_file, key_file: this task's certificate chain and private key (PEM).  A
        server needs them; a client sends them when a server asks (mutual TLS).
      ca_file: the CA certificates (PEM) that peers' certificates must chain to; None:
        the system's default trust store.
      client_auth: servers require and verify a client certificate (mutual TLS).
      check_hostname: clients check the server's certificate names the host dialled
        (the cluster address's host; an IP address needs an IP subject-alt-name).

    Contexts are built once per config (loading the files then: a missing or bad file
    raises OSError / ssl.SSLError there)."""

    def __init__(
        self,
        cert_file: str | None = None,
        key_file: str | None = None,
        ca_file: str | None = None,
        client_auth: bool = False,
        check_hostname: bool = True,
    ):
        self.cert_file = cert_file
        self.key_file = key_file
        self.ca_file = ca_file
        self.client_auth = bool(client_auth)
        self.check_hostname = bool(check_hostname)
        self._server: ssl.SSLContext | None = None
        self._client: ssl.SSLContext | None = None

    def _key(self) -> tuple:
        return (self.cert_file, self.key_file, self.ca_file, self.client_auth,
                self.check_hostname)  # fmt: skip

    def __eq__(self, other) -> bool:
        return isinstance(other, TLSConfig) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TLSConfig(cert_file={self.cert_file!r}, ca_file={self.ca_file!r}, "
            f"client_auth={self.client_auth})"
        )

    def server_context(self) -> ssl.SSLContext:
        """Raises ValueError without a certificate and key."""
        if self._server is None:
            if not self.cert_file:
                raise ValueError("A TLS server needs cert_file (and key_file)")
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(self.cert_file, self.key_file)
            if self.client_auth:
                ctx.verify_mode = ssl.CERT_REQUIRED
                if self.ca_file:
                    ctx.load_verify_locations(self.ca_file)
                else:
                    ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
            self._server = ctx
        return self._server

    def client_context(self) -> ssl.SSLContext:
        if self._client is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.check_hostname = self.check_hostname
            if self.ca_file:
                ctx.load_verify_locations(self.ca_file)
            else:
                ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
            if self.cert_file:
                ctx.load_cert_chain(self.cert_file, self.key_file)
            self._client = ctx
        return self._client


_TLS_CACHE: dict[tuple, TLSConfig] = {}


def tls_config() -> TLSConfig | None:
    """The process's TLS configuration from the environment; None (plain TCP) when
    none of these is set:

      ASYNCFLOW_TLS_CERT_FILE, ASYNCFLOW_TLS_KEY_FILE   this task's certificate and key
      ASYNCFLOW_TLS_CA_FILE                             CAs that sign the cluster's certs
      ASYNCFLOW_TLS_CLIENT_AUTH=1                       servers require client certs
      ASYNCFLOW_TLS_CHECK_HOSTNAME=0                    don't check the server's name
      ASYNCFLOW_TLS=1                                   TLS with only the defaults

    Every task and client of a cluster must agree on TLS or not: a plain peer of a TLS
    task fails its handshake (UnavailableError)."""
    env = os.environ
    key = (
        env.get("ASYNCFLOW_TLS_CERT_FILE") or None,
        env.get("ASYNCFLOW_TLS_KEY_FILE") or None,
        env.get("ASYNCFLOW_TLS_CA_FILE") or None,
        env.get("ASYNCFLOW_TLS_CLIENT_AUTH", "0") not in ("", "0", "false", "False"),
        env.get("ASYNCFLOW_TLS_CHECK_HOSTNAME", "1") not in ("", "0", "false", "False"),
    )
    if key[:4] == (None, None, None, False) and env.get("ASYNCFLOW_TLS", "0") in (
        "",
        "0",
        "false",
        "False",
    ):
        return None
    cfg = _TLS_CACHE.get(key)
    if cfg is None:
        cfg = _TLS_CACHE[key] = TLSConfig(*key)
    return cfg


def _mac(secret: bytes, *parts: bytes) -> bytes:
    return hmac.new(secret, b"".join(parts), hashlib.sha256).digest()


# -- tensors ------------------------------------------------------------------------------

_DTYPES: dict[str, np.dtype] = {
    np.dtype(t).name: np.dtype(t)
    for t in (
        np.float16,
        np.float32,
        np.float64,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.bool_,
        np.complex64,
        np.complex128,
    )
}
try:  # bfloat16 and friends, as asyncflow.dtypes uses them
    import ml_dtypes

    _DTYPES["bfloat16"] = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - a declared dependency
    pass

# Tensor descriptor kinds in meta.
_RAW, _STRINGS, _DEAD, _LOSSY, _NONE = 0, 1, 2, 3, 4  # _NONE: a fetched op's result


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) & ~(_ALIGN - 1)


def encode_tensors(values) -> tuple[list, list, int]:
    """(descriptors for meta, buffers to write, total payload bytes) for `values`.

    Raises UnimplementedError for a value that is not an array of a known dtype."""
    descs, bufs, offset = [], [], 0
    for v in values:
        if v is DEAD or v is None:
            descs.append([_DEAD if v is DEAD else _NONE])
            continue
        lossy = type(v) is _Lossy
        arr = v.bits if lossy else v
        if type(arr) is not np.ndarray:
            arr = np.asarray(arr)
        if arr.dtype.hasobject:
            flat = [x if isinstance(x, bytes) else _as_bytes(x) for x in arr.ravel()]
            lens = np.fromiter(map(len, flat), dtype=np.uint64, count=len(flat))
            blob = b"".join(flat)
            descs.append([_STRINGS, list(arr.shape), int(lens.nbytes + len(blob))])
            chunk = [memoryview(lens).cast("B"), blob]
            n = lens.nbytes + len(blob)
        else:
            name = arr.dtype.name
            if name not in _DTYPES or not _LITTLE:
                raise errors.UnimplementedError(
                    None, None, f"Cannot send a tensor of dtype {arr.dtype} between tasks"
                )
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
            n = arr.nbytes
            descs.append([_LOSSY if lossy else _RAW, name, list(arr.shape), n])
            chunk = [memoryview(arr.reshape(-1)).cast("B")] if n else []
        bufs.extend(chunk)
        pad = _aligned(n) - n
        if pad:
            bufs.append(_PAD[:pad])
        offset += n + pad
    return descs, bufs, offset


def _as_bytes(x) -> bytes:
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, bytes | bytearray | memoryview):
        return bytes(x)
    raise errors.UnimplementedError(
        None, None, f"Cannot send a value of type {type(x).__name__} between tasks"
    )


class _Lease:
    """One lending of a connection's body buffer (the base of the array handed out)."""

    __slots__ = ("__array_interface__", "buffer", "__weakref__")


def decode_tensors(descs, payload) -> list:
    """The values `descs` describe, read from `payload` (a memoryview): views of it
    where the payload owns its own buffer, copies otherwise.

    Raises InvalidArgumentError for any descriptor that does not fit the payload."""
    if not isinstance(descs, list) or len(descs) > MAX_TENSORS:
        raise _bad("tensor list")
    if payload is None:  # only empty tensors (e.g. no uninitialised variables) were sent
        payload = b""
    out, offset, size = [], 0, len(payload)
    for d in descs:
        if not isinstance(d, list) or not d or not isinstance(d[0], int):
            raise _bad("tensor descriptor")
        kind = d[0]
        if kind == _DEAD or kind == _NONE:
            out.append(DEAD if kind == _DEAD else None)
            continue
        if kind == _STRINGS and len(d) == 3:
            shape, n = _shape(d[1]), d[2]
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if not isinstance(n, int) or n < 8 * count or offset + n > size:
                raise _bad("string tensor size")
            if count == 0:
                out.append(np.empty(shape, dtype=object))
                offset += _aligned(n)
                continue
            lens = np.frombuffer(payload, np.uint64, count, offset)
            if int(lens.sum()) != n - 8 * count:
                raise _bad("string lengths")
            pos = offset + 8 * count
            items = np.empty(count, dtype=object)
            for i, ln in enumerate(lens.tolist()):
                items[i] = bytes(payload[pos : pos + ln])
                pos += ln
            out.append(items.reshape(shape))
        elif kind in (_RAW, _LOSSY) and len(d) == 4:
            dtype = _DTYPES.get(d[1]) if isinstance(d[1], str) else None
            shape, n = _shape(d[2]), d[3]
            if dtype is None:
                raise _bad(f"dtype {d[1]!r}")
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if n != count * dtype.itemsize or offset + n > size:
                raise _bad("tensor size")
            if count:
                arr = np.frombuffer(payload, dtype, count, offset).reshape(shape)
            else:
                arr = np.empty(shape, dtype)
            if kind == _LOSSY:
                arr = _Lossy(arr)
            out.append(arr)
        else:
            raise _bad("tensor kind")
        offset += _aligned(n)
    return out


def _shape(s) -> tuple:
    if (
        not isinstance(s, list)
        or len(s) > MAX_RANK
        or not all(isinstance(x, int) and 0 <= x < 1 << 48 for x in s)
    ):
        raise _bad("shape")
    return tuple(s)


def _bad(what: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, f"Malformed message: bad {what}")


# -- errors across the wire ---------------------------------------------------------------


def encode_error(exc: BaseException) -> dict:
    if isinstance(exc, errors.OpError):
        code = exc.error_code or errors.UNKNOWN
        msg = exc.message
    else:
        code, msg = errors.UNKNOWN, f"{type(exc).__name__}: {exc}"
    return {"code": int(code), "msg": msg}


def error_from_meta(meta) -> errors.OpError:
    code = meta.get("code") if isinstance(meta, dict) else None
    msg = meta.get("msg") if isinstance(meta, dict) else None
    try:
        cls = errors.exception_type_from_error_code(code)
    except (KeyError, TypeError):
        cls = errors.UnknownError
    return cls(None, None, msg if isinstance(msg, str) else "Unknown remote error")


def unavailable(message: str) -> errors.UnavailableError:
    return errors.UnavailableError(None, None, message)


# -- the connection ---------------------------------------------------------------------


class Connection(asyncio.BufferedProtocol):
    """One authenticated TCP connection; `on_frame(conn, kind, rid, meta, payload)` is
    called for each complete frame, `on_lost(conn, error)` once when it ends.

    Client side: `await conn.ready` before sending.  `call(kind, meta, tensors)` sends a
    request and returns a future of (meta, tensors); `send(...)` is one-way."""

    # Keep-alive: a connection owed an answer pings after `ping_interval` s of silence
    # and gives up (UnavailableError) after `dead_after` s: a lost task is reported
    # within 10 s even when its host stops answering without closing the socket.
    ping_interval = 1.0
    dead_after = 6.0

    def __init__(self, secret: bytes, server: bool, on_frame, on_lost=None, incarnation=0):
        self.secret = secret
        self.server = server
        self.on_frame = on_frame
        self.on_lost = on_lost
        self.incarnation = incarnation  # ours (server) or the peer's (client)
        self.transport = None
        self.loop = asyncio.get_event_loop()
        self.ready = self.loop.create_future()
        self.closed: BaseException | None = None
        self.authed = False
        self.peer = ""
        self._scratch = bytearray(_SCRATCH)
        self._view = memoryview(self._scratch)
        self._have = 0  # bytes in scratch
        self._start = 0  # where the unparsed bytes in scratch begin
        self._limit = 0  # pre-auth: read no further than this
        self._nonce = secrets.token_bytes(32)
        self._peer_nonce = b""
        self._body = None  # a large frame's body buffer being filled
        self._body_view = None
        self._body_pos = 0
        self._body_head = None
        self._spare = None  # a large frame's body buffer and its lease, for reuse
        self._calls: dict[int, asyncio.Future] = {}
        self._next_id = 1
        self.last_recv = time.monotonic()
        self._keepalive = None
        self.state = None  # what the server keeps per connection
        self._handshake_timer = None

    # -- asyncio callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            except (OSError, AttributeError):  # pragma: no cover - exotic transports
                pass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._handshake_timer = self.loop.call_later(HANDSHAKE_TIMEOUT, self._handshake_expired)
        if self.server:
            transport.write(SERVER_HELLO.pack(b"AFH", VERSION, self._nonce, self.incarnation))
            self._limit = CLIENT_HELLO.size
        else:
            self._limit = SERVER_HELLO.size

    def _handshake_expired(self) -> None:
        if not self.authed:
            self.abort(unavailable(f"Handshake with {self.peer} timed out"))

    def get_buffer(self, sizehint):
        if self._body_view is not None:
            return self._body_view[self._body_pos :]
        if self._limit:  # handshake: never read past the hello
            return self._view[self._have : self._limit]
        if self._have == len(self._scratch):
            self._compact()
        return self._view[self._have :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_recv = time.monotonic()
        if self._body_view is not None:
            self._body_pos += nbytes
            if self._body_pos == len(self._body_view):
                self._finish_body()
            return
        self._have += nbytes
        try:
            if self._limit:
                if self._have < self._limit:
                    return
                self._handshake()
                if self._limit or self.closed is not None:
                    return
            self._parse()
        except _ProtocolError as e:
            self.abort(unavailable(f"Protocol error from {self.peer}: {e}"))

    def eof_received(self):
        return False  # close

    def connection_lost(self, exc) -> None:
        self.abort(unavailable(f"Connection to {self.peer or 'peer'} lost" + _why(exc)))

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass

    # -- handshake
    def _handshake(self) -> None:
        data = bytes(self._view[: self._limit])
        self._have = self._start = 0
        if self.server:
            if not self._peer_nonce:
                magic, ver, cn, mac = CLIENT_HELLO.unpack(data)
                want = _mac(self.secret, b"c", self._nonce, cn)
                if magic != b"AFC" or ver != VERSION or not hmac.compare_digest(mac, want):
                    # Refused before reading anything more: no request is ever parsed.
                    self.abort(errors.UnauthenticatedError(None, None, "Bad client hello"))
                    return
                self._peer_nonce = cn
                self.transport.write(
                    SERVER_PROOF.pack(b"AFS", VERSION, _mac(self.secret, b"s", cn, self._nonce))
                )
                self._authed()
        else:
            if not self._peer_nonce:
                magic, ver, sn, inc = SERVER_HELLO.unpack(data)
                if magic != b"AFH" or ver != VERSION:
                    self.abort(unavailable(f"{self.peer} does not speak this protocol"))
                    return
                self._peer_nonce = sn
                self.incarnation = inc
                mac = _mac(self.secret, b"c", sn, self._nonce)
                self.transport.write(CLIENT_HELLO.pack(b"AFC", VERSION, self._nonce, mac))
                self._limit = SERVER_PROOF.size
            else:
                magic, ver, mac = SERVER_PROOF.unpack(data)
                want = _mac(self.secret, b"s", self._nonce, self._peer_nonce)
                if magic != b"AFS" or not hmac.compare_digest(mac, want):
                    self.abort(
                        errors.UnauthenticatedError(
                            None, None, f"{self.peer} failed to prove the cluster secret"
                        )
                    )
                    return
                self._authed()

    def _authed(self) -> None:
        self._limit = 0
        self.authed = True
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        if not self.ready.done():
            self.ready.set_result(self)

    # -- frames in
    def _compact(self) -> None:
        left = self._have - self._start
        if self._start:
            self._scratch[:left] = self._scratch[self._start : self._have]
        self._have, self._start = left, 0

    def _parse(self) -> None:
        view = self._view
        while self.closed is None:
            avail = self._have - self._start
            if avail < HEADER.size:
                break
            magic, ver, kind, rid, mlen, plen = HEADER.unpack_from(view, self._start)
            if magic != MAGIC or ver != VERSION or kind not in _KINDS:
                raise _ProtocolError("bad frame header")
            if mlen > MAX_META or plen > MAX_PAYLOAD or (plen and mlen % _ALIGN):
                raise _ProtocolError(f"frame too large (meta {mlen}, payload {plen})")
            body = mlen + plen
            if HEADER.size + body <= len(self._scratch):
                if avail < HEADER.size + body:
                    if self._start + HEADER.size + body > len(self._scratch):
                        self._compact()
                    break
                s = self._start + HEADER.size
                meta = bytes(view[s : s + mlen])
                payload = bytearray(view[s + mlen : s + body]) if plen else None
                self._start += HEADER.size + body
                self._dispatch(kind, rid, meta, memoryview(payload) if plen else None)
                continue
            # A large frame: one body buffer, the socket reads straight into it.
            buf = self._body_buffer(body)
            have = min(avail - HEADER.size, body)
            s = self._start + HEADER.size
            bview = memoryview(buf)
            bview[:have] = view[s : s + have]
            self._start += HEADER.size + have
            self._body, self._body_view, self._body_pos = buf, bview, have
            self._body_head = (kind, rid, mlen)
            if have == body:
                self._finish_body()
                continue
            break
        if self._start == self._have:
            self._start = self._have = 0

    def _body_buffer(self, n: int) -> np.ndarray:
        """A buffer for a large frame's body: the last one again once nothing made from
        its previous lending lives (the tensors decoded from a body are views of it),
        which saves faulting fresh pages in at every step; else a new one."""
        spare = self._spare  # (array, weak reference to its live lease) or None
        if spare is not None and spare[0].nbytes >= n and spare[1]() is None:
            return self._lend(spare[0], n)
        try:
            buf = np.empty(n, dtype=np.uint8)
        except MemoryError:
            raise _ProtocolError(f"cannot allocate {n} bytes for a frame") from None
        if spare is None or n >= spare[0].nbytes:
            return self._lend(buf, n)
        return buf

    def _lend(self, buf: np.ndarray, n: int) -> np.ndarray:
        """`buf[:n]` through a lease: every array or view made from the result holds the
        lease, so the lease's weak reference tells when the buffer is free again."""
        lease = _Lease()
        lease.__array_interface__ = buf[:n].__array_interface__
        lease.buffer = buf
        self._spare = (buf, weakref.ref(lease))
        return np.asarray(lease)

    def _finish_body(self) -> None:
        kind, rid, mlen = self._body_head
        bview = self._body_view
        self._body = self._body_view = self._body_head = None
        self._body_pos = 0
        try:
            self._dispatch(kind, rid, bytes(bview[:mlen]), bview[mlen:])
            if self._start < self._have:
                self._parse()
        except _ProtocolError as e:
            self.abort(unavailable(f"Protocol error from {self.peer}: {e}"))

    def _dispatch(self, kind, rid, meta_bytes, payload) -> None:
        try:
            meta = json.loads(meta_bytes) if meta_bytes else {}
        except (ValueError, UnicodeDecodeError):
            raise _ProtocolError("meta is not JSON") from None
        if not isinstance(meta, dict):
            raise _ProtocolError("meta is not an object")
        if kind == REPLY or kind == ERROR:
            fut = self._calls.pop(rid, None)
            if fut is not None and not fut.done():
                if kind == REPLY:
                    fut.set_result((meta, payload))
                else:
                    fut.set_exception(error_from_meta(meta))
            return
        if kind == PING:
            self.send(PONG, rid)
            return
        if kind == PONG:
            return
        try:
            self.on_frame(self, kind, rid, meta, payload)
        except Exception as e:  # noqa: BLE001 - a peer's bad input must not crash the task
            raise _ProtocolError(f"{type(e).__name__}: {e}") from None

    # -- frames out
    def send(self, kind: int, rid: int = 0, meta=None, tensors=None) -> None:
        """Write one frame (never blocks).  Raises the connection's error if closed."""
        if self.closed is not None:
            raise self.closed
        if tensors:
            descs, bufs, plen = encode_tensors(tensors)
            meta = dict(meta or {})
            meta["t"] = descs
        else:
            bufs, plen = (), 0
        mb = json.dumps(meta, separators=(",", ":")).encode() if meta else b""
        if plen and len(mb) % _ALIGN:
            mb += b" " * (_ALIGN - len(mb) % _ALIGN)
        if len(mb) > MAX_META or plen > MAX_PAYLOAD:
            raise errors.InvalidArgumentError(
                None, None, f"Message too large to send (meta {len(mb)}, payload {plen})"
            )
        head = HEADER.pack(MAGIC, VERSION, kind, rid, len(mb), plen) + mb
        if plen <= 65536:
            self.transport.write(b"".join([head, *bufs]))
        else:
            self.transport.writelines([head, *bufs])

    def call(self, kind: int, meta=None, tensors=None) -> asyncio.Future:
        """Send a request; a future of (reply meta, payload)."""
        rid = self._next_id
        self._next_id = (rid + 1) & 0xFFFFFFFF or 1
        fut = self.loop.create_future()
        self._calls[rid] = fut
        try:
            self.send(kind, rid, meta, tensors)
        except BaseException:
            del self._calls[rid]
            raise
        if self._keepalive is None:
            self._keepalive = self.loop.call_later(self.ping_interval, self._check_alive)
        return fut

    def _check_alive(self) -> None:
        self._keepalive = None
        if self.closed is not None or not self._calls:
            return
        idle = time.monotonic() - self.last_recv
        if idle >= self.dead_after:
            self.abort(unavailable(f"No response from {self.peer} for {idle:.1f} s"))
            return
        if idle >= self.ping_interval:
            try:
                self.send(PING)
            except errors.OpError:
                return
        self._keepalive = self.loop.call_later(self.ping_interval, self._check_alive)

    @property
    def pending_calls(self) -> int:
        return len(self._calls)

    def abort(self, error: BaseException) -> None:
        """Close the connection and fail its pending calls with `error` (once)."""
        if self.closed is not None:
            return
        self.closed = error
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self.transport is not None:
            self.transport.abort()
        if not self.ready.done():
            self.ready.set_exception(error)
            self.ready.exception()  # (retrieved: nobody may be waiting)
        calls, self._calls = self._calls, {}
        for fut in calls.values():
            if not fut.done():
                fut.set_exception(error)
        if self.on_lost is not None:
            self.on_lost(self, error)


class _ProtocolError(Exception):
    pass


def _why(exc) -> str:
    return f": {exc}" if exc else ""


async def serve(protocol_factory, host: str, port: int, tls: TLSConfig | None = None):
    """An asyncio server on host:port making a connection with `protocol_factory` per
    peer (over TLS with `tls`, the handshake bounded by HANDSHAKE_TIMEOUT)."""
    kw = {}
    if tls is not None:
        kw = {"ssl": tls.server_context(), "ssl_handshake_timeout": HANDSHAKE_TIMEOUT}
    return await asyncio.get_running_loop().create_server(protocol_factory, host, port, **kw)


async def connect(
    host: str,
    port: int,
    secret: bytes,
    on_frame,
    on_lost=None,
    wait_s=10.0,
    tls: TLSConfig | None = None,
    server_hostname: str | None = None,
):
    """An authenticated client connection to host:port (over TLS with `tls`, checking
    the server's certificate names `server_hostname`, by default `host`).

    Raises UnavailableError when the task cannot be reached in `wait_s` seconds or its
    TLS handshake fails, UnauthenticatedError when it does not share the cluster
    secret."""
    loop = asyncio.get_running_loop()
    kw = {}
    if tls is not None:
        kw = {
            "ssl": tls.client_context(),
            "server_hostname": server_hostname or host,
            "ssl_handshake_timeout": HANDSHAKE_TIMEOUT,
        }
    try:
        # (wait_for, not asyncio.timeout: a synchronous session drives its step, and so
        # this, outside any Task; the handshake has its own timer)
        _, conn = await asyncio.wait_for(
            loop.create_connection(
                lambda: Connection(secret, False, on_frame, on_lost), host, port, **kw
            ),
            wait_s,
        )
        await conn.ready
    except TimeoutError:
        raise unavailable(f"Timed out connecting to {host}:{port}") from None
    except ssl.SSLError as e:  # (an OSError: before it)
        raise unavailable(f"TLS handshake with {host}:{port} failed: {e}") from None
    except OSError as e:
        raise unavailable(f"Failed to connect to {host}:{port}: {e}") from None
    return conn
