"""The resolvers that ask a cloud service for the cluster: GCE instance groups,
Kubernetes pods and Cloud TPUs.

asyncflow ships no Google API or Kubernetes client.  As TF does without them, the GCE
and Kubernetes resolvers raise ImportError unless given the client object to use
(`service=` / `override_client=`, duck-typed: the same calls TF makes on them), and the
TPU resolver accepts only addresses it can use without the Cloud TPU API ('local',
'grpc://host:port', or KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS).
"""

from __future__ import annotations

import enum
import os
import urllib.error

from asyncflow.distribute.cluster_resolver.base import ClusterResolver, format_master_url
from asyncflow.distributed.cluster import ClusterSpec

__all__ = [
    "GCEClusterResolver",
    "KubernetesClusterResolver",
    "KubernetesExecutableLocation",
    "TPUClusterResolver",
]


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class GCEClusterResolver(ClusterResolver):
    """The RUNNING instances of a GCE instance group, as the one job `task_type`
    (addresses sorted), read from the Compute API on every call.

    Raises:
      ImportError: no `service` given and googleapiclient is not installed.
    """

    def __init__(
        self,
        project,
        zone,
        instance_group,
        port,
        task_type="worker",
        task_id=0,
        rpc_layer="grpc",
        credentials="default",
        service=None,
    ):
        self._project = project
        self._zone = zone
        self._instance_group = instance_group
        self._port = port
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._credentials = credentials
        if service is None:
            if not _has_module("googleapiclient"):
                raise ImportError(
                    "googleapiclient must be installed before using the GCE cluster resolver"
                )
            from googleapiclient import discovery

            service = discovery.build("compute", "v1", credentials=None)
        self._service = service

    def cluster_spec(self) -> ClusterSpec:
        groups = self._service.instanceGroups()
        request = groups.listInstances(
            project=self._project,
            zone=self._zone,
            instanceGroups=self._instance_group,
            body={"instanceState": "RUNNING"},
            orderBy="name",
        )
        workers = []
        while request is not None:
            response = request.execute()
            for item in response["items"]:
                name = item["instance"].split("/")[-1]
                details = self._service.instances().get(
                    project=self._project, zone=self._zone, instance=name
                )
                if details is not None:
                    ip = details.execute()["networkInterfaces"][0]["networkIP"]
                    workers.append(f"{ip}:{self._port}")
            request = self._service.instanceGroups().listInstances_next(
                previous_request=request, previous_response=response
            )
        return ClusterSpec({self._task_type: sorted(workers)})

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        task_type = self._task_type if task_type is None else task_type
        task_id = self._task_id if task_id is None else task_id
        if task_type is None or task_id is None:
            return ""
        address = self.cluster_spec().task_address(task_type, task_id)
        return format_master_url(address, rpc_layer or self._rpc_layer)

    @property
    def task_type(self):
        return self._task_type

    @task_type.setter
    def task_type(self, task_type):
        raise RuntimeError(
            "You cannot reset the task_type of the GCEClusterResolver after it has been created."
        )

    @property
    def task_id(self):
        return self._task_id

    @task_id.setter
    def task_id(self, task_id):
        self._task_id = task_id

    @property
    def rpc_layer(self):
        return self._rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer):
        self._rpc_layer = rpc_layer


class ExecutableLocation(enum.Enum):
    """Where the program runs relative to the Kubernetes cluster it asks about."""

    WITHIN_CLUSTER = 0
    OFF_CLUSTER = 1


KubernetesExecutableLocation = ExecutableLocation


class KubernetesClusterResolver(ClusterResolver):
    """Each job's Running pods (those matching its label selectors, by pod name),
    at their hosts' IPs and `tf_server_port`, read from the Kubernetes API on every call.

    Raises:
      ImportError: no `override_client` given and the kubernetes client is not installed.
      ValueError: an `executable_location` that is not a KubernetesExecutableLocation.
    """

    def __init__(
        self,
        job_to_label_mapping=None,
        tf_server_port=8470,
        rpc_layer="grpc",
        override_client=None,
        executable_location=ExecutableLocation.WITHIN_CLUSTER,
    ):
        if override_client is None:
            if not _has_module("kubernetes"):
                raise ImportError(
                    "The Kubernetes Python client must be installed before using the "
                    "Kubernetes Cluster Resolver. To install the Kubernetes Python client, "
                    "run `pip install kubernetes` on your command line."
                )
            from kubernetes import config as k8s_config

            if executable_location == ExecutableLocation.WITHIN_CLUSTER:
                k8s_config.load_incluster_config()
            elif executable_location == ExecutableLocation.OFF_CLUSTER:
                k8s_config.load_kube_config()
            else:
                raise ValueError("The executable location provided is invalid.")
        self._job_to_label_mapping = job_to_label_mapping or {"worker": ["job-name=tensorflow"]}
        self._tf_server_port = tf_server_port
        self._override_client = override_client
        self.task_type = None
        self.task_id = None
        self.rpc_layer = rpc_layer

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        if task_type is None or task_id is None:
            return ""
        address = self.cluster_spec().task_address(task_type, task_id)
        return format_master_url(address, rpc_layer or self.rpc_layer)

    def cluster_spec(self) -> ClusterSpec:
        """Raises RuntimeError when a matching pod is not Running."""
        client = self._override_client
        if client is None:
            from kubernetes import client as k8s_client
            from kubernetes import config as k8s_config

            k8s_config.load_kube_config()
            client = k8s_client.CoreV1Api()
        cluster = {}
        for job, selectors in self._job_to_label_mapping.items():
            pods = []
            for selector in selectors:
                listing = client.list_pod_for_all_namespaces(label_selector=selector)
                for pod in sorted(listing.items, key=lambda p: p.metadata.name):
                    if pod.status.phase != "Running":
                        raise RuntimeError(
                            f'Pod "{pod.metadata.name}" is not running; phase: '
                            f'"{pod.status.phase}"'
                        )
                    pods.append(f"{pod.status.host_ip}:{self._tf_server_port}")
            cluster[job] = pods
        return ClusterSpec(cluster)


class TPUClusterResolver(ClusterResolver):
    """A Cloud TPU's workers.  Without the Cloud TPU API only explicit addresses work:
    'local' (an empty cluster), 'grpc://host:port', or the comma-separated list in
    KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS when no `tpu` is given.

    Raises:
      ValueError: no TPU named and no endpoints in the environment.
      NotImplementedError: several TPUs.
      urllib.error.URLError: a TPU name, which only the Cloud TPU API could resolve (TF
        raises the same where the GCE metadata server cannot be reached).
    """

    def __init__(
        self,
        tpu=None,
        zone=None,
        project=None,
        job_name="worker",
        coordinator_name=None,
        coordinator_address=None,
        credentials="default",
        service=None,
        discovery_url=None,
    ):
        if isinstance(tpu, list):
            if len(tpu) != 1:
                raise NotImplementedError(
                    "Using multiple TPUs in a single session is not yet implemented"
                )
            tpu = tpu[0]
        endpoints = []
        if not tpu:
            env = os.environ.get("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "")
            endpoints = [e for e in env.split(",") if e]
            if not endpoints:
                raise ValueError("Please provide a TPU Name to connect to.")
            tpu = endpoints[0]
        else:
            endpoints = [tpu]
        tpu = tpu.decode() if isinstance(tpu, bytes) else tpu
        if tpu != "local" and not all(e.startswith("grpc://") for e in endpoints):
            raise urllib.error.URLError(
                f"asyncflow cannot reach the Cloud TPU API to resolve the TPU {tpu!r}; "
                "give its address as 'grpc://host:port'"
            )
        self._tpu = tpu
        self._endpoints = [e[len("grpc://") :] for e in endpoints if e != "local"]
        self._coordinator_name = coordinator_name
        self._coordinator_address = coordinator_address
        self.task_type = job_name
        self.task_id = 0

    def get_job_name(self) -> str:
        return self.task_type

    def cluster_spec(self) -> ClusterSpec:
        if self._tpu == "local":
            return ClusterSpec({})
        cluster = {self.task_type: list(self._endpoints)}
        if self._coordinator_address:
            cluster[self._coordinator_name] = [self._coordinator_address]
        return ClusterSpec(cluster)

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The first TPU worker's grpc:// address ('' for 'local').

        Raises:
          ValueError: the cluster has no such job or task.
        """
        if self._tpu == "local":
            return ""
        spec = self.cluster_spec()
        if task_type is not None and task_id is not None:
            address = spec.task_address(task_type, task_id)
        elif self.task_type is not None and self.task_id is not None:
            address = spec.task_address(self.task_type, self.task_id)
        else:
            tasks = spec.job_tasks(self.task_type)
            if not tasks:
                raise ValueError("No TPUs with the specified names exist.")
            address = tasks[0]
        return format_master_url(address, "grpc")

    get_master = master

    @property
    def environment(self) -> str:
        return ""
