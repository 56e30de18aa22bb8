"""Resource containers: where stateful ops keep variables, queues, readers.

A `ResourceMgr` maps (container, name) to a resource object.  Each Session owns one
manager for the default container "" (TF1's DirectSession: two sessions on one graph
have independent variables).  Named containers (`with af.container("x")` or a
`container` attr) live in a process-wide manager shared by every session of the
process, and `Session.reset(target, containers)` clears them.

Invariant: lookups and creation are atomic with respect to the event loop (no await
between the check and the insert), so two kernels never create the same resource twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from asyncflow import errors

__all__ = ["ResourceMgr", "shared_resources", "reset_containers"]


class ResourceMgr:
    def __init__(self, name: str = ""):
        self.name = name
        self._containers: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def lookup(self, container: str, name: str) -> Any:
        try:
            return self._containers[container][name]
        except KeyError:
            raise errors.NotFoundError(
                None, None, f"Resource {container}/{name} does not exist."
            ) from None

    def get(self, container: str, name: str) -> Any | None:
        return self._containers.get(container, {}).get(name)

    def lookup_or_create(self, container: str, name: str, factory: Callable[[], Any]) -> Any:
        c = self._containers.get(container)
        if c is not None:
            r = c.get(name)
            if r is not None:
                return r
        with self._lock:
            c = self._containers.setdefault(container, {})
            r = c.get(name)
            if r is None:
                r = c[name] = factory()
            return r

    def create(self, container: str, name: str, resource: Any) -> None:
        with self._lock:
            c = self._containers.setdefault(container, {})
            if name in c:
                raise errors.AlreadyExistsError(
                    None, None, f"Resource {container}/{name} already exists."
                )
            c[name] = resource

    def delete(self, container: str, name: str) -> None:
        with self._lock:
            self._containers.get(container, {}).pop(name, None)

    def clear(self, containers=None) -> None:
        """Drop every resource of `containers` (all when None)."""
        with self._lock:
            if containers is None:
                self._containers.clear()
            else:
                for c in containers:
                    self._containers.pop(c, None)

    def containers(self) -> list[str]:
        return list(self._containers)


_shared = ResourceMgr("process")


def shared_resources() -> ResourceMgr:
    """The process-wide manager for named containers."""
    return _shared


def reset_containers(containers=None) -> None:
    _shared.clear(containers)
