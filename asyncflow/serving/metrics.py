"""Prometheus metrics for the model server, as TF Serving exports them.

TF Serving's `--monitoring_config_file` (text format)

    prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }

makes the REST port answer Prometheus' text format at that path.  The metric names are
TF Serving's, written its way (`/tensorflow/serving/request_count` becomes
`:tensorflow:serving:request_count`), so its dashboards' queries keep working:

    :tensorflow:serving:request_count        counter   model_name, version, status
    :tensorflow:serving:request_latency      histogram model_name, API, entrypoint (µs)
    :tensorflow:serving:batching:processed_batch_size  histogram  (rows run per batch)
    :tensorflow:serving:batching:padded_batch_size     histogram  (after allowed sizes)
    :tensorflow:serving:batching:queued_requests       gauge      (waiting for a batch)
    :tensorflow:serving:model_versions       gauge     model_name, state (AVAILABLE ...)

(`version` on request_count and the last four are asyncflow's: TF Serving has no
per-version count nor these gauges.)  Requests are counted for Predict, Classify and
Regress, with `status` the TF error code name ("OK", "INVALID_ARGUMENT", ...).

The hot path only bumps plain counters (a dict entry and a bucket index); everything
else (batch-size histograms from each Batcher's exact counts, queue depths, version
states) is read from the live objects when Prometheus scrapes, by a custom collector
on a registry of its own (several servers in one process do not share metrics).
"""

from __future__ import annotations

import bisect
import collections

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

from asyncflow import errors
from asyncflow.protos import error_codes_pb2
from asyncflow.serving.config import parse_text_proto

__all__ = ["ServingMetrics", "parse_monitoring_config", "DEFAULT_METRICS_PATH", "CONTENT_TYPE"]

DEFAULT_METRICS_PATH = "/monitoring/prometheus/metrics"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# TF Serving's request latency buckets: Exponential(10, 1.8, 33) microseconds.
LATENCY_BUCKETS_US = tuple(10 * 1.8**i for i in range(33))
BATCH_SIZE_BUCKETS = tuple(2**i for i in range(11))  # 1 .. 1024 rows

_code_name = error_codes_pb2.Code.Name


def parse_monitoring_config(text: str) -> str | None:
    """A MonitoringConfig text proto -> the metrics path, or None when not enabled.

    Raises:
      InvalidArgumentError: unparsable text, or a path that does not start with '/'.
    """
    top = parse_text_proto(text)
    configs = top.get("prometheus_config") or [{}]
    config = configs[-1]
    enabled = config.get("enable", [False])[-1]
    if enabled not in (True, "true", "True", 1):
        return None
    path = config.get("path", [DEFAULT_METRICS_PATH])[-1] or DEFAULT_METRICS_PATH
    if not isinstance(path, str) or not path.startswith("/"):
        raise errors.InvalidArgumentError(None, None, f"Invalid prometheus path: {path}")
    return path


class _Histogram:
    __slots__ = ("counts", "sum")

    def __init__(self, n):
        self.counts = [0] * (n + 1)  # the last is +Inf
        self.sum = 0.0


class ServingMetrics:
    """Request counts and latencies recorded by the front ends; the rest read at scrape."""

    def __init__(self, model_registry):
        self.model_registry = model_registry
        self._requests: collections.Counter = collections.Counter()
        self._latency: dict[tuple, _Histogram] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    # -- recording (hot path)
    def record(
        self,
        model_name: str,
        version,
        api: str,
        entrypoint: str,
        error: BaseException | None,
        seconds: float,
    ) -> None:
        """One finished Predict/Classify/Regress: its status and wall time."""
        if error is None:
            status = "OK"
        elif isinstance(error, errors.OpError):
            status = _code_name(error.error_code)
        else:
            status = "UNKNOWN"
        self._requests[(model_name, "" if version is None else str(version), status)] += 1
        key = (model_name, api, entrypoint)
        h = self._latency.get(key)
        if h is None:
            h = self._latency[key] = _Histogram(len(LATENCY_BUCKETS_US))
        us = seconds * 1e6
        h.counts[bisect.bisect_left(LATENCY_BUCKETS_US, us)] += 1
        h.sum += us

    # -- exposition
    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)

    def collect(self):
        requests = Metric(":tensorflow:serving:request_count", "The total number of requests.",
                          "counter")  # fmt: skip
        for (model, version, status), n in sorted(self._requests.items()):
            requests.add_sample(
                ":tensorflow:serving:request_count",
                {"model_name": model, "version": version, "status": status},
                n,
            )
        yield requests

        latency = HistogramMetricFamily(
            ":tensorflow:serving:request_latency",
            "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
            labels=("model_name", "API", "entrypoint"),
        )
        for key, h in sorted(self._latency.items()):
            latency.add_metric(key, _cumulative(LATENCY_BUCKETS_US, h.counts), h.sum)
        yield latency

        yield from self._batching_families()

        versions = GaugeMetricFamily(
            ":tensorflow:serving:model_versions",
            "Model versions the server knows, by state (AVAILABLE: loaded and serving).",
            labels=("model_name", "state"),
        )
        for name in self.model_registry.names():
            states = collections.Counter(s for _, s, _ in self.model_registry.status(name))
            for state, n in sorted(states.items()):
                versions.add_metric((name, state), n)
        yield versions

    def _batching_families(self):
        labels = ("model_name", "version", "signature")
        processed = HistogramMetricFamily(
            ":tensorflow:serving:batching:processed_batch_size",
            "Rows run per batch (before padding).",
            labels=labels,
        )
        padded = HistogramMetricFamily(
            ":tensorflow:serving:batching:padded_batch_size",
            "Rows run per batch after padding to allowed_batch_sizes.",
            labels=labels,
        )
        queued = GaugeMetricFamily(
            ":tensorflow:serving:batching:queued_requests",
            "Requests waiting for a batch.",
            labels=labels,
        )
        for name in self.model_registry.names():
            try:
                versions = self.model_registry.versions(name)
            except errors.NotFoundError:
                continue
            for version, model in sorted(versions.items()):
                for signature, batcher in sorted(model._batchers.items()):
                    key = (name, str(version), signature)
                    m = batcher.metrics
                    processed.add_metric(key, *_from_exact(m.batch_sizes))
                    padded.add_metric(key, *_from_exact(m.padded_batch_sizes))
                    queued.add_metric(key, batcher.queued_requests())
        yield processed
        yield padded
        yield queued


def _cumulative(bounds, counts) -> list:
    out, total = [], 0
    for bound, n in zip(bounds, counts):
        total += n
        out.append((f"{bound:.10g}", total))
    out.append(("+Inf", total + counts[-1]))
    return out


def _from_exact(sizes: collections.Counter):
    """Histogram buckets and sum from exact {size: count}."""
    counts = [0] * (len(BATCH_SIZE_BUCKETS) + 1)
    total = 0
    for size, n in sizes.items():
        counts[bisect.bisect_left(BATCH_SIZE_BUCKETS, size)] += n
        total += size * n
    return _cumulative(BATCH_SIZE_BUCKETS, counts), total
