"""Multi-process runs through ``jax.distributed``: start-up with bounded time-outs, who writes.

Every process runs the same program; ``jax.distributed.initialize`` joins them into one runtime
whose ``jax.devices()`` spans all processes, so ``core.train.data_parallel_mesh()`` is a global
mesh and each process feeds only its own share of every batch. Results and caches are written by
process 0 only (:func:`is_primary`); orbax checkpoints are written collectively by all processes.

On CPU the cross-process collectives use gloo (``jax_cpu_collectives_implementation``); on GPU
and TPU JAX's own collectives are used. Time-outs are bounded: a process that cannot reach the
coordinator fails after ``initialization_timeout`` seconds, and when a peer dies the survivors are
stopped by the coordination service within ``heartbeat_timeout`` seconds instead of hanging in a
collective.
"""

from __future__ import annotations

import jax


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    bind_address: str | None = None,
    initialization_timeout: int = 120,
    heartbeat_timeout: int = 30,
) -> None:
    """Join this process to a multi-process JAX run.

    With every argument ``None``, JAX detects the cluster itself (SLURM, Open MPI, TPU pods,
    Kubernetes) or reads ``JAX_COORDINATOR_ADDRESS``; otherwise give all three.

    Args:
      coordinator_address: ``host:port`` of process 0's coordination service.
      num_processes: number of processes.
      process_id: this process's index in ``[0, num_processes)``.
      bind_address: where the coordinator listens (default: JAX's, all interfaces; tests pass
        ``127.0.0.1:<port>`` to stay on loopback).
      initialization_timeout: seconds to wait for all processes to join.
      heartbeat_timeout: seconds without a heartbeat after which a process is declared dead.
    """
    given = [coordinator_address, num_processes, process_id]
    if any(v is not None for v in given) and any(v is None for v in given):
        raise ValueError(
            "give coordinator_address, num_processes and process_id together (or none of them, "
            f"for cluster auto-detection); got {given}"
        )
    if num_processes is not None and not (
        num_processes >= 1 and process_id is not None and 0 <= process_id < num_processes
    ):
        raise ValueError(
            f"process_id={process_id}, num_processes={num_processes}; expected "
            "0 <= process_id < num_processes"
        )
    # Only the CPU client reads this; asking for the backend here would start it too early.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address,
        num_processes,
        process_id,
        coordinator_bind_address=bind_address,
        initialization_timeout=initialization_timeout,
        heartbeat_timeout_seconds=heartbeat_timeout,
    )


def is_primary() -> bool:
    """True in process 0 (and in every single-process run): the process that writes results."""
    return jax.process_index() == 0


__all__ = ["initialize", "is_primary"]
