"""The models a server answers for: name -> version -> ServableModel, labels, states.

Both front ends (REST in asyncflow.serving.rest, gRPC in asyncflow.serving.grpc_server)
resolve requests here, and the version manager (asyncflow.serving.manager) adds and
removes versions here while requests run.

Each version the server has heard of has a state, TF Serving's ModelVersionStatus.State:
LOADING while its SavedModel loads, AVAILABLE while it answers requests, UNLOADING while
its in-flight requests finish, END once unloaded or when its load failed (with the
error kept for status requests).

Invariants: only AVAILABLE versions are in `_models`, so `get()` never hands out a
version being loaded or unloaded; `get()` is synchronous, and a caller that awaits
`model.predict(...)` in the same loop pass it called `get()` in is counted as in flight
before an unload can start draining (asyncflow.serving.model.ServableModel.adrain).
"""

from __future__ import annotations

from collections.abc import Mapping

from asyncflow import errors

__all__ = ["ModelRegistry", "START", "LOADING", "AVAILABLE", "UNLOADING", "END"]

START, LOADING, AVAILABLE, UNLOADING, END = "START", "LOADING", "AVAILABLE", "UNLOADING", "END"


class ModelRegistry:
    """name -> {version: ServableModel}; the latest version answers unversioned requests."""

    def __init__(self):
        self._models: dict[str, dict[int, object]] = {}
        self._labels: dict[str, dict[str, int]] = {}
        # name -> version -> (state, OpError or None)
        self._states: dict[str, dict[int, tuple[str, errors.OpError | None]]] = {}

    # -- labels
    def set_labels(self, name: str, labels: Mapping[str, int]) -> None:
        """Version labels (`/labels/L` URLs); each must name a loaded version.

        Raises:
          FailedPreconditionError: a label names a version that is not available.
        """
        versions = self._models.get(name, {})
        for version in labels.values():
            if version not in versions:
                raise errors.FailedPreconditionError(
                    None,
                    None,
                    f"Request to assign label to version {version} of model {name}, which "
                    "is not currently available for inference",
                )
        self._labels[name] = dict(labels)

    def label_version(self, name: str, label: str) -> int:
        """The version `label` names. Raises InvalidArgumentError for an unknown label."""
        version = self._labels.get(name, {}).get(label)
        if version is None:
            raise errors.InvalidArgumentError(
                None, None, f"Unrecognized servable version label: {label}"
            )
        return version

    # -- versions
    def add(self, name: str, version: int, model) -> None:
        """Make `model` answer for `name` version `version` (state AVAILABLE)."""
        self._models.setdefault(name, {})[int(version)] = model
        self.set_state(name, version, AVAILABLE)

    def remove(self, name: str, version: int):
        """Stop answering for a version (state UNLOADING); the model, or None."""
        model = self._models.get(name, {}).pop(int(version), None)
        if model is not None:
            self.set_state(name, version, UNLOADING)
        return model

    def set_state(self, name: str, version: int, state: str, error=None) -> None:
        self._states.setdefault(name, {})[int(version)] = (state, error)

    def state(self, name: str, version: int) -> tuple[str, errors.OpError | None] | None:
        return self._states.get(name, {}).get(int(version))

    def names(self) -> list[str]:
        return sorted(set(self._models) | set(self._states))

    def versions(self, name: str) -> dict[int, object]:
        """version -> model of the AVAILABLE versions. Raises NotFoundError if none."""
        versions = self._models.get(name)
        if not versions:
            raise errors.NotFoundError(None, None, f"Could not find any versions of model {name}")
        return versions

    def status(self, name: str, version: int | None = None) -> list[tuple]:
        """[(version, state, error or None)], newest first: every version of `name` the
        server has heard of, or just `version`.

        Raises:
          NotFoundError: the model, or that version of it, is unknown.
        """
        states = self._states.get(name)
        if not states:
            raise errors.NotFoundError(None, None, f"Could not find any versions of model {name}")
        if version is not None:
            if version not in states:
                raise errors.NotFoundError(
                    None, None, f"Could not find version {version} of model {name}"
                )
            return [(version, *states[version])]
        return [(v, *states[v]) for v in sorted(states, reverse=True)]

    def get(self, name: str, version: int | None = None):
        """(version, model); NotFoundError as TF Serving words it."""
        versions = self._models.get(name)
        if version is None:
            if not versions:
                raise errors.NotFoundError(
                    None, None, f"Servable not found for request: Latest({name})"
                )
            version = max(versions)
        elif not versions or version not in versions:
            raise errors.NotFoundError(
                None, None, f"Servable not found for request: Specific({name}, {version})"
            )
        return version, versions[version]

    def resolve(self, name: str, version: int | None = None, label: str | None = None):
        """`get()` with a version label instead of a number allowed."""
        if label is not None:
            version = self.label_version(name, label)
        return self.get(name, version)

    async def aclose(self) -> None:
        for name, versions in self._models.items():
            for version, model in versions.items():
                await model.aclose()
                self.set_state(name, version, END)
        self._models.clear()
