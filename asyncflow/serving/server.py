"""`python -m asyncflow.serving`: tensorflow_model_server's flags; REST on aiohttp, gRPC on
grpc.aio (asyncflow.serving.grpc_server), both on one loop.

    python -m asyncflow.serving --port=8500 --rest_api_port=8501 --model_name=m \
        --model_base_path=/models/m

`--model_base_path` holds numbered version directories (`1/`, `2/`, ...), each a TF1
SavedModel; the latest (highest) version is loaded, as TF Serving's default version
policy does.  `--model_config_file` (instead) serves several models with their version
policies and labels (asyncflow.serving.config).  The base paths are polled every
`--file_system_poll_wait_seconds` and new versions swapped in without failing a request
(asyncflow.serving.manager).  Every step runs with `Session.arun` on
the server's own loop.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from collections.abc import Mapping

from asyncflow import errors
from asyncflow.serving import model as _model
from asyncflow.serving.config import ModelConfig, parse_model_config
from asyncflow.serving.manager import VersionManager, find_versions, refreeze
from asyncflow.serving.registry import ModelRegistry
from asyncflow.serving.rest import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_DEPTH, make_server

__all__ = [
    "find_versions",
    "load_version",
    "ModelServer",
    "parse_args",
    "serve",
    "session_config",
    "main",
]


async def load_version(
    registry: ModelRegistry,
    name: str,
    base_path: str,
    version: int,
    *,
    batching: Mapping | None = None,
    tags=("serve",),
):
    """Load version `version` (the directory `base_path/version`) into `registry`."""
    model = await _model.aload(os.path.join(base_path, str(version)), tags=tags, batching=batching)
    registry.add(name, version, model)
    return model


def _no_versions(registry: ModelRegistry, config: ModelConfig) -> errors.OpError:
    """Why a model has no version at startup: its base path, or its versions' load errors."""
    try:
        find_versions(config.base_path)
    except errors.NotFoundError as e:
        return e
    for _, _, error in registry.status(config.name) if config.name in registry.names() else []:
        if error is not None:
            return error
    return errors.NotFoundError(
        None,
        None,
        f"No versions of servable {config.name} found under base path {config.base_path}"
        + ("" if config.policy == ("latest", 1) else f" for version policy {config.policy}"),
    )


def parse_batching_parameters(text: str) -> dict:
    """TF Serving's BatchingParameters text proto -> Batcher options.

    Understands `max_batch_size`, `batch_timeout_micros`, `max_enqueued_batches`,
    `num_batch_threads` (Batcher's max_concurrent_batches) written `name { value: N }`,
    `allowed_batch_sizes: N` (repeated) and `pad_variable_length_inputs: true`.
    """
    import re

    names = {
        "max_batch_size": "max_batch_size",
        "batch_timeout_micros": "batch_timeout_micros",
        "max_enqueued_batches": "max_enqueued_batches",
        "num_batch_threads": "max_concurrent_batches",
    }
    options: dict = {}
    text = re.sub(r"#[^\n]*", "", text)
    for field, value in re.findall(r"(\w+)\s*\{\s*value\s*:\s*(\d+)\s*\}", text):
        if field not in names:
            raise ValueError(f"Unsupported batching parameter: {field}")
        options[names[field]] = int(value)
    allowed = [int(v) for v in re.findall(r"allowed_batch_sizes\s*:\s*(\d+)", text)]
    if allowed:
        options["allowed_batch_sizes"] = allowed
    pad = re.findall(r"pad_variable_length_inputs\s*:\s*(\w+)", text)
    if pad:
        if pad[-1] not in ("true", "false", "True", "False", "1", "0"):
            raise ValueError(f"pad_variable_length_inputs: not a bool: {pad[-1]}")
        options["pad_variable_length_inputs"] = pad[-1] in ("true", "True", "1")
    return options


class ModelServer:
    """A registry, an aiohttp server and (with `grpc_port`) a grpc.aio server on the
    running loop: `await start()`, `aclose()`."""

    def __init__(
        self,
        registry: ModelRegistry,
        *,
        host: str = "0.0.0.0",
        port: int = 8501,
        grpc_port: int | None = None,
        grpc_host: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        request_timeout_s: float | None = None,
        idle_timeout_s: float = 75.0,
        metrics_path: str | None = None,
    ):
        self.registry = registry
        self.host = host
        self.port = port
        # With a metrics path, requests are counted and timed and Prometheus scrapes
        # that path on the REST port (TF Serving's --monitoring_config_file).
        self.metrics = None
        if metrics_path is not None:
            from asyncflow.serving.metrics import ServingMetrics

            self.metrics = ServingMetrics(registry)
        self._rest_options = dict(
            max_body_bytes=max_body_bytes,
            max_depth=max_depth,
            request_timeout_s=request_timeout_s,
            metrics=self.metrics,
            metrics_path=metrics_path,
        )
        self.idle_timeout_s = idle_timeout_s
        self.request_timeout_s = request_timeout_s
        self.max_body_bytes = max_body_bytes
        self.grpc_port = grpc_port
        self.grpc_host = host if grpc_host is None else grpc_host
        self._runner = None
        self._grpc = None

    async def start(self) -> int:
        """Bind and listen; the port bound (useful with port 0)."""
        from aiohttp import web

        rest_server = make_server(
            self.registry, idle_timeout_s=self.idle_timeout_s, **self._rest_options
        )
        self._runner = web.ServerRunner(rest_server)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        if self.grpc_port is not None:
            await self._start_grpc()
        return self.port

    async def _start_grpc(self) -> None:
        import grpc

        from asyncflow.serving import grpc_server

        self._grpc = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", self.max_body_bytes),
                ("grpc.max_send_message_length", -1),
            ]
        )
        grpc_server.add_services(
            self._grpc, self.registry, self.request_timeout_s, metrics=self.metrics
        )
        bound = self._grpc.add_insecure_port(f"{self.grpc_host}:{self.grpc_port}")
        if bound == 0:
            raise errors.UnavailableError(
                None, None, f"Could not bind gRPC server to {self.grpc_host}:{self.grpc_port}"
            )
        self.grpc_port = bound
        await self._grpc.start()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop listening on both ports at once, let the requests in flight finish
        (gRPC calls get `grace_s` seconds, REST requests aiohttp's shutdown timeout),
        and close the connections; the models stay loaded."""
        grpc_srv, self._grpc = self._grpc, None
        runner, self._runner = self._runner, None
        stopping = []
        if grpc_srv is not None:
            stopping.append(grpc_srv.stop(grace_s))
        if runner is not None:
            stopping.append(runner.cleanup())
        await asyncio.gather(*stopping)

    async def aclose(self) -> None:
        """`stop()`, then close every model (their batchers and sessions)."""
        await self.stop()
        await self.registry.aclose()


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m asyncflow.serving",
        description="Serve TF1 SavedModels with TF Serving's REST API.",
    )
    p.add_argument("--port", type=int, default=8500, help="gRPC port (0: any free port)")
    p.add_argument("--grpc_host", default="0.0.0.0")
    p.add_argument("--rest_api_port", type=int, default=8501)
    p.add_argument("--rest_api_host", default="0.0.0.0")
    p.add_argument("--model_name", default="default")
    p.add_argument("--model_base_path", default="")
    p.add_argument("--model_config_file", default="", help="a ModelServerConfig (text format)")
    p.add_argument("--saved_model_tags", default="serve")
    p.add_argument(
        "--file_system_poll_wait_seconds",
        type=float,
        default=1.0,
        help="how often to look for new model versions (<= 0: only at startup)",
    )
    p.add_argument(
        "--monitoring_config_file",
        default="",
        help='a MonitoringConfig (text format): prometheus_config { enable: true path: "..." }',
    )
    p.add_argument(
        "--tensorflow_intra_op_parallelism",
        type=int,
        default=0,
        help="threads one op (a BLAS call) may use; 0: 1 in this server (see blas_threads)",
    )
    p.add_argument("--enable_batching", type=_bool, default=False, nargs="?", const=True)
    p.add_argument("--batching_parameters_file", default="")
    p.add_argument(
        "--rest_api_timeout_in_ms", type=int, default=30000, help="per-request deadline"
    )
    p.add_argument("--rest_api_idle_timeout_s", type=float, default=75.0)
    p.add_argument("--rest_api_max_body_bytes", type=int, default=DEFAULT_MAX_BODY_BYTES)
    p.add_argument("--rest_api_max_json_depth", type=int, default=DEFAULT_MAX_DEPTH)
    args = p.parse_args(argv)
    if bool(args.model_base_path) == bool(args.model_config_file):
        p.error("give exactly one of --model_base_path and --model_config_file")
    return args


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text}")


async def serve(
    args: argparse.Namespace,
    ready: asyncio.Future | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Load the model, serve until `stop` is set (SIGINT/SIGTERM when `stop` is None),
    then drain: stop accepting, finish the requests in flight, close the models.

    `ready`, when given, gets the ModelServer once it listens (its `port` and
    `grpc_port` are the bound ports).
    """
    batching = None
    if args.enable_batching:
        batching = {}
        if args.batching_parameters_file:
            with open(args.batching_parameters_file) as f:  # noqa: ASYNC230 (startup)
                batching = parse_batching_parameters(f.read())
    metrics_path = None
    if args.monitoring_config_file:
        from asyncflow.serving.metrics import parse_monitoring_config

        with open(args.monitoring_config_file) as f:  # noqa: ASYNC230 (startup)
            metrics_path = parse_monitoring_config(f.read())
    registry = ModelRegistry()
    tags = tuple(t for t in args.saved_model_tags.split(",") if t)
    if args.model_config_file:
        with open(args.model_config_file) as f:  # noqa: ASYNC230 (startup)
            configs = parse_model_config(f.read())
    else:
        configs = [ModelConfig(args.model_name, args.model_base_path)]
    manager = VersionManager(
        registry,
        configs,
        batching=batching,
        tags=tags,
        poll_wait_s=args.file_system_poll_wait_seconds,
        session_config=session_config(args),
        freeze_gc=True,
    )
    try:
        await manager.poll_once()
        loaded = {}
        for config in configs:
            try:
                versions = registry.versions(config.name)
            except errors.NotFoundError:
                raise _no_versions(registry, config) from None
            if config.labels:
                registry.set_labels(config.name, config.labels)
            loaded[config.name] = sorted(versions)
    except BaseException:
        await manager.aclose()
        await registry.aclose()
        gc.unfreeze()
        raise
    if args.model_config_file:
        version = ", ".join(f"{n} {v}" for n, v in loaded.items())
    else:
        version = loaded[args.model_name][-1]
    # What is alive now lives as long as the server (modules, the models): frozen, the
    # cycle collector no longer walks it on every full collection (see manager).
    refreeze()
    manager.start()
    server = ModelServer(
        registry,
        host=args.rest_api_host,
        port=args.rest_api_port,
        grpc_port=args.port,
        grpc_host=args.grpc_host,
        max_body_bytes=args.rest_api_max_body_bytes,
        max_depth=args.rest_api_max_json_depth,
        request_timeout_s=args.rest_api_timeout_in_ms / 1000 or None,
        idle_timeout_s=args.rest_api_idle_timeout_s,
        metrics_path=metrics_path,
    )
    try:
        port = await server.start()
    except BaseException:
        await server.aclose()
        gc.unfreeze()
        raise
    print(
        f"Running gRPC ModelServer at {args.grpc_host}:{server.grpc_port} ...",
        file=sys.stderr,
        flush=True,
    )
    print(
        f"Exporting HTTP/REST API at {args.rest_api_host}:{port}: "
        + (
            f"models {version}"
            if args.model_config_file
            else f"model {args.model_name} version {version}"
        ),
        file=sys.stderr,
        flush=True,
    )
    handled = []
    loop = asyncio.get_running_loop()
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
                handled.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # (not the main thread, or no signals here)
    if ready is not None:
        ready.set_result(server)
    try:
        await stop.wait()
        # Draining: the ports close at once (new connections are refused), requests in
        # flight finish (REST: up to aiohttp's shutdown timeout; gRPC: `grace_s`), then
        # the models close.  A second signal meanwhile changes nothing.
        print("Draining: finishing the requests in flight", file=sys.stderr, flush=True)
    finally:
        try:
            await manager.aclose()
            await server.aclose()
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
            gc.unfreeze()  # (the process collects as before: serve() may be embedded)


def session_config(args: argparse.Namespace):
    """The ConfigProto of the models' sessions: `--tensorflow_intra_op_parallelism`
    is their intra-op thread count, as in TF Serving (0: `blas_threads`' choice, 1).
    It is also the process's CPU budget (asyncflow.devices.cpu_budget), so with 1 a
    kernel's BLAS call runs on the calling thread without weighing two threads
    against one first (the server's concurrency is its requests)."""
    from asyncflow.config import ConfigProto

    n = blas_threads(args.tensorflow_intra_op_parallelism)
    return ConfigProto(intra_op_parallelism_threads=n)


def blas_threads(intra_op_parallelism: int) -> int:
    """BLAS threads per call for `--tensorflow_intra_op_parallelism` (0: auto = 1).

    A model server's parallelism comes from its concurrent requests, and its kernels
    are small: a batch of 64 rows through a 64x128 layer is ~35 µs on one thread.
    OpenBLAS splits such a GEMM over every core once it passes a size threshold, and
    when another process or the server's own I/O holds the other core, the call waits
    for a descheduled BLAS thread: 0.3-4 ms measured on a busy 2-core machine (the
    batching slowdown at max_batch_size 64 of benchmarks/serving_rest_bench.py).  So
    the server asks for one thread unless told otherwise; models whose single ops are
    large (big convolutions, wide layers) may set N > 1.
    """
    return intra_op_parallelism if intra_op_parallelism > 0 else 1


def main(argv=None) -> None:
    args = parse_args(argv)
    from threadpoolctl import threadpool_limits

    # For the whole process (BLAS's limit is global); see blas_threads.
    threadpool_limits(limits=blas_threads(args.tensorflow_intra_op_parallelism), user_api="blas")
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args))
    else:
        uvloop.run(serve(args))
