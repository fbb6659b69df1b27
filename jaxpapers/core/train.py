"""A jitted optax training loop, data-parallel over a ``jax.sharding.Mesh``, with orbax checkpoints.

The host loop around :func:`jaxpapers.core.fit.fit`'s step, for runs that need what one scanned
program cannot give: the caller supplies a pure ``loss_fn(params, batch, key)``, an optax
optimiser and a ``batch_fn(step)`` that returns the batch of a given step on the host (so a
resumed run sees the same batches). Parameters are replicated, the batch is sharded along its
leading axis over the ``"data"`` axis of the mesh, and XLA inserts the gradient all-reduce. The
step is :func:`~jaxpapers.core.fit.fit`'s own: a non-finite loss, gradient or update is not
applied and the run freezes (``TrainResult.finite`` is False). Every ``checkpoint_every`` steps
the parameters, optimiser state, the freeze flag and loss history are saved with orbax; a new
call with the same ``checkpoint_dir`` resumes from the latest checkpoint and, seeds and batches
being functions of the step, continues exactly where the interrupted run stopped.

flax.nnx models train through their state::

    graphdef, params = nnx.split(model, nnx.Param)
    loss_fn = lambda p, batch, key: loss(nnx.merge(graphdef, p), batch, key)
    result = train(loss_fn, params, optax.adam(1e-3), batch_fn, steps=1000, key=key)
    model = nnx.merge(graphdef, result.params)

Multi-host: call ``jaxpapers.core.distributed.initialize(...)`` (``jax.distributed`` with bounded
time-outs) in every process before building the mesh; ``data_parallel_mesh()`` then spans all
processes' devices, and ``batch_fn`` returns each process's own share of the global batch
(assembled with ``jax.make_array_from_process_local_data``). Orbax checkpoints are written by all
processes together and restore in any process layout (``tests/test_distributed.py`` runs two
processes on localhost against one).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxpapers.core.checks import check_key
from jaxpapers.core.fit import StepCarry, _apply_step
from jaxpapers.core.progress import progress

PyTree = Any
LossFn = Callable[[PyTree, PyTree, jax.Array], jax.Array]


class TrainResult(NamedTuple):
    """Output of :func:`train` (the fields of :class:`~jaxpapers.core.fit.FitResult`, plus
    ``resumed_from``).

    Attributes:
      params: trained parameters (replicated over the mesh); the last finite ones if the run
        froze.
      opt_state: the optimiser state after the last applied step.
      losses: ``[steps]`` float64 NumPy array, the training loss of every step (after a freeze:
        the loss of the frozen parameters, which may be non-finite).
      finite: whether every step was applied (no non-finite loss, gradient or update).
      resumed_from: step the run resumed from (0 for a fresh run).
    """

    params: PyTree
    opt_state: PyTree
    losses: np.ndarray
    finite: bool
    resumed_from: int


def data_parallel_mesh(devices: list[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh with axis ``"data"`` over ``devices`` (default: all devices of all processes)."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), ("data",), axis_types=(AxisType.Auto,))


def _check_batch(batch: PyTree, n_devices: int) -> None:
    for leaf in jax.tree.leaves(batch):
        shape = np.shape(leaf)
        if not shape:
            raise ValueError("batch leaves must have a leading batch axis; got a scalar leaf")
        if shape[0] % n_devices:
            raise ValueError(
                f"batch leading axis {shape[0]} must be a multiple of the number of "
                f"data-parallel devices of this process ({n_devices})"
            )


def make_train_step(loss_fn: LossFn, optimizer: optax.GradientTransformation):
    """The pure update ``(params, opt_state, batch, key) -> (params, opt_state, loss)``.

    The step of :func:`jaxpapers.core.fit.fit` and :func:`train` on its own: a non-finite loss,
    gradient or update is not applied (the inputs come back unchanged).
    """

    def step(params, opt_state, batch, key):
        carry = StepCarry(params, opt_state, None, jnp.array(True))
        carry, loss, _ = _apply_step(loss_fn, optimizer, carry, jnp.int32(0), key, batch)
        return carry.params, carry.opt_state, loss

    return step


@functools.partial(
    jax.jit, static_argnames=("loss_fn", "optimizer", "mesh"), donate_argnames=("carry",)
)
def _step(loss_fn, optimizer, mesh, carry, batch, key, t):
    """:func:`jaxpapers.core.fit`'s step, its carry replicated over ``mesh``."""
    carry, loss, _ = _apply_step(loss_fn, optimizer, carry, t, key, batch)
    replicated = NamedSharding(mesh, P())
    return jax.lax.with_sharding_constraint((carry, loss), replicated)


def train(
    loss_fn: LossFn,
    params: PyTree,
    optimizer: optax.GradientTransformation,
    batch_fn: Callable[[int], PyTree],
    *,
    steps: int,
    key: jax.Array,
    mesh: Mesh | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 100,
    stop_after: int | None = None,
    desc: str | None = None,
) -> TrainResult:
    """Train ``params`` for ``steps`` optimiser steps, one jitted step per host iteration.

    Each step is :func:`jaxpapers.core.fit.fit`'s: a non-finite loss, gradient or update is not
    applied, and the run then keeps its last finite parameters and optimiser state for the
    remaining steps (``finite`` False; the freeze survives a checkpoint and resumption).

    Args:
      loss_fn: ``loss_fn(params, batch, key) -> scalar`` (mean over the batch). Passed to
        ``jax.jit`` as a static argument: reuse one function object to reuse the compiled step.
      params: initial parameters (any pytree of arrays).
      optimizer: an optax ``GradientTransformation`` (static too).
      batch_fn: ``batch_fn(step) -> batch``, a pytree whose leaves have a leading batch axis
        divisible by the number of devices in ``mesh``; on several hosts, the local share.
      steps: number of optimiser steps.
      key: PRNG key; step ``i`` uses ``jax.random.fold_in(key, i)``.
      mesh: data-parallel mesh with an axis named ``"data"`` (default: all devices).
      checkpoint_dir: orbax checkpoint folder; if it holds a checkpoint, training resumes from it.
      checkpoint_every: steps between checkpoints (the last step is always saved).
      stop_after: stop (with a checkpoint) after this many steps of the schedule; used to
        simulate an interruption. The returned losses then cover only the steps run.
      desc: progress-bar label.

    Returns:
      A :class:`TrainResult`.
    """
    check_key("key", key)
    if steps < 1:
        raise ValueError(f"steps={steps}; expected a positive number of steps")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every={checkpoint_every}; expected a positive integer")
    mesh = data_parallel_mesh() if mesh is None else mesh
    if "data" not in mesh.axis_names:
        raise ValueError(f"mesh axes {mesh.axis_names} must include 'data'")
    # Each process feeds its own share: the local batch splits over its local devices.
    n_data = len(mesh.local_devices)
    replicated = NamedSharding(mesh, P())
    sharded = NamedSharding(mesh, P("data"))

    # Copy first: the step donates its inputs and must never delete the caller's arrays.
    params = jax.device_put(jax.tree.map(jnp.copy, params), replicated)
    opt_state = jax.device_put(optimizer.init(params), replicated)
    ok = jax.device_put(np.bool_(True), replicated)
    losses = np.full((steps,), np.nan)
    start = 0

    manager = None
    if checkpoint_dir is not None:
        import orbax.checkpoint as ocp

        manager = ocp.CheckpointManager(
            Path(checkpoint_dir).absolute(), options=ocp.CheckpointManagerOptions(max_to_keep=2)
        )
        latest = manager.latest_step()
        if latest is not None:
            meta = manager.item_metadata(latest)
            saved_len = meta.tree["losses"].shape if meta is not None else losses.shape
            target = {"params": params, "opt_state": opt_state, "losses": np.zeros(saved_len)}
            # Checkpoints written before ``finite`` was saved hold finite runs only.
            if meta is None or "finite" in meta.tree:
                target["finite"] = ok
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
            restored = manager.restore(latest, args=ocp.args.StandardRestore(abstract))
            params, opt_state = restored["params"], restored["opt_state"]
            ok = restored.get("finite", ok)
            # A run may be resumed with more (or fewer) steps than it was started with.
            saved = np.asarray(restored["losses"], dtype=np.float64)
            n = min(len(saved), steps)
            losses[:n] = saved[:n]
            start = min(int(latest), steps)
    carry = StepCarry(params, opt_state, None, ok)

    def save(step: int) -> None:
        if manager is None:
            return
        state = {
            "params": carry.params,
            "opt_state": carry.opt_state,
            "finite": carry.ok,
            "losses": losses,
        }
        manager.save(step, args=ocp.args.StandardSave(state))
        manager.wait_until_finished()

    end = steps if stop_after is None else min(steps, start + stop_after)
    pending: list[tuple[int, jax.Array]] = []
    for i in progress(range(start, end), total=end - start, desc=desc):
        batch = batch_fn(i)
        _check_batch(batch, n_data)
        batch = jax.tree.map(
            lambda x: jax.make_array_from_process_local_data(sharded, np.asarray(x)), batch
        )
        carry, loss = _step(
            loss_fn, optimizer, mesh, carry, batch, jax.random.fold_in(key, i), np.int32(i)
        )
        pending.append((i, loss))
        done = i + 1
        if done % checkpoint_every == 0 or done == end:
            for j, value in pending:
                losses[j] = float(value)
            pending.clear()
            save(done)
    for j, value in pending:
        losses[j] = float(value)
    if manager is not None:
        manager.close()
    ran = losses[:end] if stop_after is not None else losses
    return TrainResult(carry.params, carry.opt_state, np.asarray(ran), bool(carry.ok), start)


def replicate(tree: PyTree, mesh: Mesh | None = None) -> PyTree:
    """Place every leaf of ``tree`` on all devices of ``mesh`` (replicated)."""
    mesh = data_parallel_mesh() if mesh is None else mesh
    return jax.device_put(tree, NamedSharding(mesh, P()))


def shard_batch(batch: PyTree, mesh: Mesh | None = None) -> PyTree:
    """Split ``batch`` along its leading axis over the mesh's ``"data"`` axis."""
    mesh = data_parallel_mesh() if mesh is None else mesh
    _check_batch(batch, mesh.shape["data"])
    return jax.device_put(jax.tree.map(jnp.asarray, batch), NamedSharding(mesh, P("data")))


__all__ = [
    "TrainResult",
    "data_parallel_mesh",
    "make_train_step",
    "replicate",
    "shard_batch",
    "train",
]
