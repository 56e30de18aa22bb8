"""Hot reload: keep each model's served versions what its version policy asks for.

`VersionManager(registry, configs)` polls every model's base path (TF Serving's
`--file_system_poll_wait_seconds`, default 1 s) for numbered version directories and
applies the model's version policy (latest N / all / specific) to them:

- a version the policy wants and the registry lacks is loaded (LOADING), warmed up (its
  SavedModel's warm-up requests replayed: asyncflow.serving.warmup), and only then added
  (AVAILABLE): requests keep going to the versions already served while
  it loads, on the same loop (the loader's file reads run on a worker thread);
- a version the policy no longer wants (a newer one arrived, or its directory went away)
  is taken out of the registry at once (UNLOADING), so no new request reaches it; it is
  closed after its in-flight requests finish (ServableModel.adrain), then END;
- a version whose load or warm-up fails is END with the error, shown by status requests, and is
  not retried; the policy is applied to the other versions, so a broken new version
  never replaces a working one.

This is TF Serving's availability-preserving policy: a new version is available before
the old one unloads, so no request fails during the swap.

With `freeze_gc` (the model server's choice: it owns its process) the objects alive once
a version is loaded are frozen (`gc.freeze`: the cycle collector skips them), and after
a version unloads they are thawed, collected once and frozen again (`refreeze`), so the
garbage of that version and of the loads since is freed.  A served model's graph and
the server's modules are long-lived, ~90k objects for a small model: without this,
each full collection walked all of them while requests waited (~35-50 ms a pause under
load, every few seconds with batching).

Invariants: one poll runs at a time (`_lock`); a version is in at most one of
{loading, registry, unloading}; unloads run as tasks the manager owns and `aclose()`
awaits.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import Mapping

from asyncflow import errors
from asyncflow.serving import model as _model
from asyncflow.serving import registry as _registry
from asyncflow.serving import warmup as _warmup
from asyncflow.serving.config import ModelConfig, select_versions

__all__ = ["VersionManager", "find_versions", "refreeze"]

_log = logging.getLogger("asyncflow.serving")


def find_versions(base_path: str) -> list[int]:
    """The numbered version directories under `base_path` holding a SavedModel, ascending.

    Raises:
      NotFoundError: `base_path` does not exist.
    """
    from asyncflow.saved_model import maybe_saved_model_directory

    try:
        entries = os.listdir(base_path)
    except FileNotFoundError:
        raise errors.NotFoundError(
            None, None, f"Could not find base path {base_path} for servable"
        ) from None
    versions = []
    for entry in entries:
        if entry.isdigit() and maybe_saved_model_directory(os.path.join(base_path, entry)):
            versions.append(int(entry))
    return sorted(versions)


def refreeze() -> None:
    """Thaw the frozen objects, collect every generation, freeze what is left: one full
    collection now (a pause of tens of ms for a served model), none of it later."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class VersionManager:
    """Loads, swaps and unloads model versions in `registry` as the base paths change."""

    def __init__(
        self,
        registry: _registry.ModelRegistry,
        configs: list[ModelConfig],
        *,
        batching: Mapping | None = None,
        tags=("serve",),
        poll_wait_s: float = 1.0,
        warmup: bool = True,
        session_config=None,
        freeze_gc: bool = False,
    ):
        self.registry = registry
        self.configs = list(configs)
        self.batching = batching
        self.tags = tuple(tags)
        self.poll_wait_s = poll_wait_s
        self.warmup = warmup
        self.session_config = session_config  # each version's Session's ConfigProto
        self.freeze_gc = freeze_gc  # see the module's docstring
        self._lock = asyncio.Lock()
        self._unloads: set[asyncio.Task] = set()
        self._poller: asyncio.Task | None = None
        self._labels_set: set[str] = set()

    async def poll_once(self) -> None:
        """One pass over every model: load what the policy wants, unload what it doesn't."""
        async with self._lock:
            for config in self.configs:
                await self._reconcile(config)

    async def _reconcile(self, config: ModelConfig) -> None:
        name = config.name
        try:
            available = await asyncio.to_thread(find_versions, config.base_path)
        except errors.OpError as e:
            _log.warning("%s", e.message)
            return
        failed = {v for v in available if self._failed(name, v)}
        wanted = select_versions(config.policy, [v for v in available if v not in failed])
        loaded = set(self._loaded(name))
        for version in wanted:
            if version not in loaded:
                await self._load(config, version)
        failed = {v for v in available if self._failed(name, v)}
        wanted = set(select_versions(config.policy, [v for v in available if v not in failed]))
        for version in sorted(set(self._loaded(name)) - wanted):
            self._unload(name, version)
        if config.labels and name not in self._labels_set:
            try:
                self.registry.set_labels(name, config.labels)
                self._labels_set.add(name)
            except errors.OpError as e:
                _log.warning("%s", e.message)

    def _loaded(self, name: str) -> list[int]:
        try:
            return list(self.registry.versions(name))
        except errors.NotFoundError:
            return []

    def _failed(self, name: str, version: int) -> bool:
        state = self.registry.state(name, version)
        return state is not None and state[0] == _registry.END and state[1] is not None

    async def _load(self, config: ModelConfig, version: int) -> None:
        name = config.name
        self.registry.set_state(name, version, _registry.LOADING)
        export_dir = os.path.join(config.base_path, str(version))
        model = None
        try:
            model = await _model.aload(
                export_dir, tags=self.tags, batching=self.batching, config=self.session_config
            )
            # The SavedModel's warm-up file, as TF Serving replays it (a failing record
            # fails the load); without one, each signature once on zeros.
            if self.warmup and not await _warmup.arun_warmup(model, version, export_dir):
                await model.awarmup()
        except Exception as e:  # a broken version is reported, never served
            if model is not None:
                await model.aclose()
            error = e if isinstance(e, errors.OpError) else errors.UnknownError(None, None, str(e))
            self.registry.set_state(name, version, _registry.END, error)
            _log.error("Loading servable %s version %d failed: %s", name, version, error.message)
            return
        self.registry.add(name, version, model)
        if self.freeze_gc:
            # No collection now (the old version still serves, and a pause would land
            # on its requests): the load's garbage is frozen with the model, and freed
            # at the next unload's refreeze.
            gc.freeze()
        _log.info("Successfully loaded servable version {name: %s version: %d}", name, version)

    def _unload(self, name: str, version: int) -> None:
        model = self.registry.remove(name, version)
        if model is None:
            return
        task = asyncio.get_running_loop().create_task(self._drain_and_close(name, version, model))
        self._unloads.add(task)
        task.add_done_callback(self._unloads.discard)

    async def _drain_and_close(self, name: str, version: int, model) -> None:
        try:
            await model.adrain()
            await model.aclose()
        finally:
            self.registry.set_state(name, version, _registry.END)
            _log.info("Unloaded servable version {name: %s version: %d}", name, version)
            del model  # (this frame's was the last reference)
        if self.freeze_gc:
            refreeze()  # the version's frozen graph is garbage now: freed

    async def wait_unloaded(self) -> None:
        """Wait for the unloads started so far (their in-flight requests finish first)."""
        while self._unloads:
            await asyncio.gather(*list(self._unloads), return_exceptions=True)

    def start(self) -> None:
        """Poll every `poll_wait_s` seconds in a task (none when it is <= 0, as TF
        Serving polls once then)."""
        if self.poll_wait_s > 0 and self._poller is None:
            self._poller = asyncio.get_running_loop().create_task(self._poll_forever())

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_wait_s)  # a polling period, not synchronisation
            try:
                await self.poll_once()
            except Exception:  # keep polling; the error is in the log
                _log.exception("Polling model base paths failed")

    async def aclose(self) -> None:
        """Stop polling and finish the unloads in progress (the registry stays)."""
        if self._poller is not None:
            self._poller.cancel()
            try:
                await self._poller
            except asyncio.CancelledError:
                pass
            self._poller = None
        await self.wait_unloaded()
