"""The continual protocol: pretrain on task 1, then learn tasks 2 and 3 with every method.

Class-incremental (the protocol of iCaRL and DER's class-IL setting): one classifier over every
class seen so far, trained with the softmax over all of them (the old classes' logits are not
masked: the new task's videos contain no old objects, so plain fine-tuning learns to stop
predicting the old classes, which is the catastrophic forgetting the claim is about), and scored
without task identity (each stage predicts over every class seen so far). The three tasks' classes
are disjoint, so no later task relearns an earlier one.

Training is :func:`jaxpapers.core.fit.fit` throughout. ``finetune`` trains every weight from the
images (pretraining and sequential fine-tuning, vmapped over seeds; one compiled program for
pretraining and every task). ``adapt`` trains the adapter methods on a task from features the
frozen base computed once per seed: its parameters are the new task's row of every adapter part
and the classifier, and a traced 0/1 mask (:func:`masked_updates`: the parts a run's method does
not train, the classifier columns of classes that are not new) zeroes gradients before Adam, so
those parameters keep their values exactly. Every training video of task ``t`` is decoded with
the known task id (``decode(..., task_id=t)``: all routing weight on row ``t``), as
class-incremental prompt/adapter methods train (L2P's prompt mask, InfLoRA, MoE adapters); the
router decides only at test time. (Routed training sent about half of a new task's videos to
task 1's frozen row: no gradient to row ``t`` and the class prior ``log(1e-4)`` on their own
classes.) Methods and ablations are per-run flags
(:func:`method_flags`), the task index and its new classes are traced, so one compiled program
trains every method, grid point and seed on tasks 2 and 3 (vmapped over runs).

Tuning: every method (fine-tuning and each adapter method) runs the whole sequence at every
learning rate of its grid (``Config.grid``: the same number of points for every method, each
centred on its method's optimum so that the selected rate is not at an edge; the extras list any
method whose selected rate is), and each method's
reported rows are those of the grid point with the best final average mIoU on validation videos
(held out from training, disjoint from the test videos; one point per method for every seed).
Pretraining is shared and not tuned.

One compiled ``evaluate`` scores every run on every task's test videos after every stage (mIoU,
identity switches, routing accuracy), and on the validation videos after the last stage; STEAM's
runs are scored twice, by their router and oracle-routed at test time (every video to its true
task's DASH, experts, prompt and class prior: ``decode(..., task_id=...)``, the diagnostic rows
``ORACLES``; same trained parameters, no training of their own);
``path_outputs`` keeps fine-tuning's and STEAM's raw outputs on each task's test videos right
after the task and after the last one (STEAM's routed and oracle-routed), for the whole-path
exactness check (:func:`whole_path`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers.core.fit import FitResult, fit
from jaxpapers.core.pytrees import stack_trees
from jaxpapers.core.segmentation_metrics import confusion_matrix, iou_from_confusion
from jaxpapers.steam import (
    Adapters,
    DashSlope,
    Experts,
    Projectors,
    ScaleShift,
    VISConfig,
    adapter_inputs,
    assignments,
    dash_init,
    decode,
    encode,
    feature_moments,
    fold_scale_shift,
    identity_projectors,
    identity_switches,
    init_adapters,
    init_vis,
    input_subspace,
    match,
    matching_loss,
    orthogonal_projector,
    scale_shift,
    segment,
    temporal_loss,
)
from jaxpapers.steam.experiments._tasks import (
    NUM_CLASSES,
    TASKS,
    class_mask,
    classes_up_to,
    label_ids,
    task_videos,
)

FINETUNE = "sequential fine-tuning"
L2P = "L2P prompt retrieval"
STEAM = "STEAM"
NO_DASH = "STEAM w/o DASH"
NO_TEMPORAL = "STEAM w/o temporal experts"
NO_SCOA = "STEAM w/o SCOA"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Every size-dependent setting of the P08 protocol (one per run size, ``SIZES``).

    ``lrs`` is the learning-rate grid of the adapter methods (L2P, STEAM and its ablations),
    ``finetune_lrs`` that of sequential fine-tuning, and ``method_lrs`` ``((method, grid), ...)``
    overrides the grid of a named adapter method (:meth:`grid`): grids of the same size (the same
    tuning budget for every method), each centred on its method's optimum (adapters train a small
    row on frozen features and want smaller steps than full fine-tuning; trained with the known
    task id, STEAM, L2P and w/o temporal experts chose the smallest rate of the earlier adapter
    grid 1e-3..1e-2 on validation, so the adapter grid is one half-decade lower, 3e-4..3e-3, and
    STEAM w/o DASH, which chose its middle 3e-3, keeps 1e-3..1e-2; the selected rate must not sit
    at either end of its grid, which the extras check). Every method runs the
    whole sequence once per grid point, and the point with the best final average mIoU on the
    validation videos (``val_videos`` per task, held out from training and disjoint from the test
    videos) is the one reported. ``lr`` is pretraining's (shared, not tuned).
    """

    size: int
    width: int
    dim: int
    rank: int
    frames: int
    train_videos: int
    test_videos: int
    pretrain_steps: int
    task_steps: int
    batch: int
    subspace_videos: int
    val_videos: int
    queries: int = 4
    temperature: float = 0.05
    balance: float = 1.0
    lr: float = 3e-3
    lrs: tuple[float, ...] = (3e-4, 1e-3, 3e-3)
    finetune_lrs: tuple[float, ...] = (3e-3, 1e-2, 3e-2)
    method_lrs: tuple[tuple[str, tuple[float, ...]], ...] = ((NO_DASH, (1e-3, 3e-3, 1e-2)),)
    energy: float = 0.99

    def __post_init__(self) -> None:
        grids = {"lrs": self.lrs, "finetune_lrs": self.finetune_lrs}
        for entry in self.method_lrs:
            if len(entry) != 2 or entry[0] not in ADAPTER_METHODS:
                raise ValueError(
                    f"method_lrs={self.method_lrs!r}; expected (method, grid) pairs naming "
                    f"adapter methods {tuple(ADAPTER_METHODS)}"
                )
            grids[f"method_lrs[{entry[0]!r}]"] = entry[1]
        for name, grid in grids.items():
            if not grid or any(not lr > 0 for lr in grid):
                raise ValueError(f"{name}={grid!r}; expected a non-empty grid of positive rates")
        if len({len(grid) for grid in grids.values()}) > 1:
            raise ValueError(
                f"learning-rate grids {grids!r}; expected grids of the same size (the same "
                "tuning budget for every method)"
            )

    def grid(self, method: str) -> tuple[float, ...]:
        """The learning-rate grid ``method`` is tuned on."""
        if method == FINETUNE:
            return tuple(self.finetune_lrs)
        return tuple(dict(self.method_lrs).get(method, self.lrs))


class Method(NamedTuple):
    """An adapter method: which parts of the new task's expert train, hard (L2P) retrieval, SCOA,
    and whether the objective adds the temporal (association) term (STEAM's balanced objective).

    ``adapt`` takes a ``Method`` of per-run 0/1 float arrays (:func:`method_flags`), so every
    method and ablation trains in one vmapped program: the gradients of the parts a run does not
    train are zeroed before Adam (they keep their values exactly).
    """

    dash: bool = False
    frame: bool = False
    video: bool = False
    prompt: bool = False
    keys: bool = False
    hard: bool = False
    scoa: bool = False
    balanced: bool = False


def method_flags(methods) -> Method:
    """A :class:`Method` of ``[runs]`` float 0/1 arrays from a sequence of methods (one per run)."""
    methods = list(methods)
    return Method(
        *(jnp.asarray([float(getattr(m, f)) for m in methods], jnp.float32) for f in Method._fields)
    )


ADAPTER_METHODS: dict[str, Method] = {
    L2P: Method(prompt=True, keys=True, hard=True),
    STEAM: Method(dash=True, frame=True, video=True, scoa=True, balanced=True),
    NO_DASH: Method(frame=True, video=True, scoa=True, balanced=True),
    NO_TEMPORAL: Method(dash=True, frame=True, scoa=True, balanced=True),
    NO_SCOA: Method(dash=True, frame=True, video=True, balanced=True),
}
METHODS: tuple[str, ...] = (FINETUNE, *ADAPTER_METHODS)
#: Diagnostic rows, not trained methods: STEAM's and its ablations' selected runs (same trained
#: parameters, its tuned rate; training already routes by the known task id) scored at TEST time
#: with every video routed to its true task (``decode(..., task_id=...)``) instead of by the
#: router. Against the method it separates "the router sends test videos to the wrong task's
#: adapters" from "the adapters cannot learn the task".
ORACLES: dict[str, str] = {m: f"{m} (oracle task id)" for m in ADAPTER_METHODS if m != L2P}
ORACLE = ORACLES[STEAM]
#: The rows of :class:`Protocol` (``methods``): every method, then the oracle-routed ones.
ROWS: tuple[str, ...] = (*METHODS, *ORACLES.values())


class Protocol(NamedTuple):
    """Every method on the task sequence (per seed), at its tuned learning rate; what the
    experiments read.

    Attributes:
      methods: row names, ``ROWS`` order (every method, then :data:`ORACLE`).
      tasks: task names.
      miou: ``[method, stage, task, seed]`` mIoU of each task after each stage.
      miou_before: ``[method, task, seed]`` mIoU of each task just before learning it.
      switches, pairs: ``[method, stage, task, seed]`` identity switches and tracked pairs.
      routed: ``[method, stage, task, seed]`` fraction of the task's test videos whose largest
        video-level routing weight is their own task's (meaningful for the adapter methods).
      path_change: ``{method: [seed]}`` for fine-tuning, STEAM and :data:`ORACLE`: the mean over
        old test videos (every earlier task's) of a video's relative output change between right
        after its task and after the last task (:func:`path_change`); STEAM's over the videos
        routed to their own task both times (NaN for a seed with none), fine-tuning's over every
        old video, the oracle's over every old video with both decodes routed to its own task.
      path_routed: ``[seed]`` how many of the earlier tasks' test videos STEAM routes to their own
        task both times (the videos its ``path_change`` averages), of ``path_videos``.
      losses: training losses by phase (seed means; adapters ``[method, step]``).
      leaks: per task, ``[adapter method, seed, (frame, video)]`` relative output of the new
        expert on the earlier inputs' subspace.
      background_only_miou: ``[task, seed]`` mIoU of the all-background prediction.
      fold_error: ``[seed]`` DASH folded into the neck vs applied after it.
      cpu_seconds: process CPU seconds per phase (compiles included).
      path_videos: the number of earlier tasks' test videos per seed.
      slope_norms: ``{part: [task][seed]}`` for STEAM's selected runs: Frobenius norms of the
        dynamic DASH slopes ``G``, ``H`` of every task's row and, for scale, of its static
        ``gamma - 1`` and ``beta`` (task 1's row is the identity).
      probe: ``{summary: [seed]}`` test accuracy of a supervised probe (multinomial logistic
        regression, :func:`probe_accuracy`) predicting a video's task from the frozen base's
        pooled features: the router's summary (``"pooled mean"``) and it with the per-frame
        spatial standard deviation (``"mean + spatial std"``): a ceiling on what a router on
        that summary can reach.
      tuning: ``{"lrs": {method: grid}, "selected": {method: lr}, "validation": {method: [per
        lr]}, "at grid edge": [methods]}``: the validation final average mIoU (seed mean) of every
        method at every point of its grid, and the methods whose selected rate is the smallest or
        largest of their grid (the optimum is then not bracketed).
    """

    methods: tuple[str, ...]
    tasks: tuple[str, ...]
    miou: np.ndarray
    miou_before: np.ndarray
    switches: np.ndarray
    pairs: np.ndarray
    routed: np.ndarray
    path_change: dict[str, list[float]]
    path_routed: list[float]
    losses: dict[str, np.ndarray]
    leaks: dict[str, np.ndarray]
    background_only_miou: np.ndarray
    fold_error: list[float]
    cpu_seconds: dict[str, float]
    path_videos: int = 0
    tuning: dict[str, Any] | None = None
    slope_norms: dict[str, list] | None = None
    probe: dict[str, list[float]] | None = None


def _video_loss(
    cfg,
    params,
    adapters,
    proj,
    feats,
    inst,
    cls,
    allowed,
    active,
    hard,
    gates=None,
    balance=None,
    task_id=None,
):
    """One video's loss: the per-frame matching loss (spatial), plus ``balance`` (a scalar, may be
    traced; ``None``: no temporal term) times the temporal association loss on the matched
    queries. ``task_id`` (may be traced): the video's known task, which then takes all the
    routing weight (``decode(..., task_id=...)``; training of the adapter methods)."""
    assign = jnp.asarray(assignments(cfg.queries, cfg.max_objects))
    out = decode(
        params,
        adapters,
        proj,
        feats,
        config=cfg,
        active=active,
        hard=hard,
        task_classes=gates,
        task_id=task_id,
    )
    if balance is None:
        per_frame = jax.vmap(matching_loss, in_axes=(0, 0, 0, 0, None, None))(
            out.class_logits, out.mask_logits, inst, cls, allowed, assign
        )
        return jnp.mean(per_frame), out
    per_frame, matched, visible = jax.vmap(match, in_axes=(0, 0, 0, 0, None, None))(
        out.class_logits, out.mask_logits, inst, cls, allowed, assign
    )
    return jnp.mean(per_frame) + balance * temporal_loss(out.queries, matched, visible), out


@functools.partial(jax.jit, static_argnames=("cfg", "graphdef", "steps", "batch"))
def finetune(
    params, adapters, proj, images, inst, cls, allowed, lr, keys, *, cfg, graphdef, steps, batch
) -> FitResult:
    """Adam on every base weight from images, one run per leading index of ``params``, ``images
    [R, N, T, H, W, C]``, ``inst``, ``cls``, ``lr [R]`` and ``keys``; ``adapters``/``proj`` are
    the identity ones (only task 1's expert active)."""
    active = jax.nn.one_hot(0, cfg.experts)

    def one(p0, im, ins, cl, lr_, key):
        def loss_fn(p, batch_, _key):
            images_b, inst_b, cls_b = batch_
            b, t = images_b.shape[:2]
            feats = encode(graphdef, p, images_b.reshape(b * t, *images_b.shape[2:]))
            feats = feats.reshape(b, t, *feats.shape[1:])
            losses, _ = jax.vmap(
                lambda f, i, c: _video_loss(cfg, p, adapters, proj, f, i, c, allowed, active, 0.0)
            )(feats, inst_b, cls_b)
            return jnp.mean(losses)

        def batch_fn(_t, k):
            idx = jax.random.randint(k, (batch,), 0, im.shape[0])
            return im[idx], ins[idx], cl[idx]

        return fit(loss_fn, p0, optax.adam(lr_), steps=steps, key=key, batch_fn=batch_fn)

    return jax.vmap(one)(params, images, inst, cls, lr, keys)


def _summary(feats: jax.Array) -> jax.Array:
    """Mean pooled feature of a batch of videos ``[N, T, g, g, D]``."""
    return feats.mean(axis=(0, 1, 2, 3))


def _row(adapters: Adapters, t) -> Adapters:
    """Task ``t``'s row of every adapter part (``t`` may be traced)."""
    return jax.tree.map(lambda x: x[t], adapters)


def _with_row(adapters: Adapters, t, row: Adapters) -> Adapters:
    return jax.tree.map(lambda x, r: x.at[t].set(r), adapters, row)


def _row_mask(method: Method) -> Adapters:
    """Per part of an expert row: 1 where ``method`` (scalar 0/1 flags) trains it."""
    return Adapters(
        dash=ScaleShift(method.dash, method.dash),
        slope=DashSlope(method.dash, method.dash),
        frame=Experts(method.frame, method.frame),
        video=Experts(method.video, method.video),
        keys=method.keys,
        prompts=method.prompt,
    )


def masked_updates(mask) -> optax.GradientTransformation:
    """Zero the updates where ``mask`` (a pytree prefix-broadcastable to the parameters, 0/1,
    may be traced) is 0. Chained before Adam, a zeroed leaf has zero moments and gets exactly
    zero updates, so it keeps its value bit for bit (as under ``optax.set_to_zero``)."""

    def init(_params):
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params
        out = jax.tree.map(lambda u, m: jnp.where(m > 0, u, jnp.zeros_like(u)), updates, mask)
        return out, state

    return optax.GradientTransformation(init, update)


class Adapted(NamedTuple):
    """One adapter run on one task (leading axis: run): the base parameters (new-class columns
    of the classifier trained), the adapters (task ``t``'s row trained), the projectors, the
    losses, whether every step was finite, and the new experts' leaks ``[(frame, video)]``."""

    params: Any
    adapters: Adapters
    projectors: Projectors
    losses: jax.Array
    finite: jax.Array
    leaks: jax.Array


@functools.partial(jax.jit, static_argnames=("cfg", "steps", "batch", "energy", "balance"))
def adapt(
    params,
    adapters: Adapters,
    proj: Projectors,
    feats,
    inst,
    cls,
    earlier,
    allowed,
    new,
    task_classes,
    keys,
    method: Method,
    lr,
    t,
    *,
    cfg: VISConfig,
    steps: int,
    batch: int,
    energy: float,
    balance: float = 1.0,
) -> Adapted:
    """Each run (leading axis of every argument but ``allowed``, ``new``, ``task_classes`` and
    ``t``) learns task ``t`` with its method (``method``: :func:`method_flags`) and learning rate
    (``lr [R]``). One compiled program serves every method, ablation, grid point, seed and task:
    ``t`` (int scalar) and the new classes ``new [C]`` (0/1) are traced, so tasks 2 and 3 reuse it.

    Before training: DASH of task ``t`` is initialised from the task's feature moments against
    task 1's (when the method uses DASH); the routing keys of task 1 and ``t`` are set to their
    tasks' mean features; with SCOA, expert ``t``'s projectors remove the subspace of the
    frame / video expert inputs of tasks ``< t`` (computed on ``earlier`` videos under the current
    model). Then Adam trains the parts of row ``t`` that the method names and the classifier
    columns of the new classes; every other parameter gets zero updates. ``allowed`` is the
    0/1 mask of every class seen so far (class-incremental: the softmax runs over all of them).
    A ``balanced`` method adds ``balance`` times the temporal loss to the per-frame loss; an
    L2P run (``keys``) adds the key-query cosine term that pulls its key to its task's queries
    (:func:`key_cosine`: the router's centred cosine). Training decodes every video with
    ``task_id = t`` (the known task), so row ``t`` gets every video's gradient.
    """
    new_cols = jnp.concatenate([jnp.asarray(new, jnp.float32), jnp.zeros((1,))])
    t = jnp.asarray(t, jnp.int32)

    def one(params, adapters, proj, feats, inst, cls, earlier, key, m, lr_):
        e = cfg.experts
        before = (jnp.arange(e) < t).astype(jnp.float32)
        active = (jnp.arange(e) <= t).astype(jnp.float32)
        keys_ = adapters.keys.at[0].set(_summary(earlier[0])).at[t].set(_summary(feats))
        mean0, std0 = feature_moments(earlier[0])
        init = dash_init(feats, mean0, std0)
        on = m.dash > 0
        dash = ScaleShift(
            jnp.where(on, adapters.dash.gamma.at[t].set(init.gamma), adapters.dash.gamma),
            jnp.where(on, adapters.dash.beta.at[t].set(init.beta), adapters.dash.beta),
        )
        adapters = adapters._replace(keys=keys_, dash=dash)

        # SCOA: the inputs expert t must not disturb are those of the earlier tasks' videos.
        rows = jax.vmap(
            jax.vmap(
                lambda f: adapter_inputs(
                    params, adapters, proj, f, config=cfg, active=before, hard=m.hard
                )
            )
        )(earlier)
        weight = before[:, None, None, None]
        pix = (rows[0] * weight).reshape(-1, cfg.dim)
        qry = (rows[1] * weight).reshape(-1, cfg.dim)
        span = functools.partial(input_subspace, energy=energy, max_rank=cfg.dim - cfg.rank)
        eye = jnp.eye(cfg.dim)
        pf = jnp.where(m.scoa > 0, orthogonal_projector(span(pix)), eye)
        pv = jnp.where(m.scoa > 0, orthogonal_projector(span(qry)), eye)
        proj = Projectors(proj.frame.at[t].set(pf), proj.video.at[t].set(pv))

        trainable = {"row": _row(adapters, t), "cls": params["cls"]}
        mask = {"row": _row_mask(m), "cls": {"kernel": new_cols[None, :], "bias": new_cols}}
        optimizer = optax.chain(masked_updates(mask), optax.adam(lr_))

        def merged(tr):
            return {**params, "cls": tr["cls"]}, _with_row(adapters, t, tr["row"])

        def loss_fn(tr, batch_, _key):
            p, ad = merged(tr)

            def video(fv, iv, cv):
                loss, _out = _video_loss(
                    cfg,
                    p,
                    ad,
                    proj,
                    fv,
                    iv,
                    cv,
                    allowed,
                    active,
                    m.hard,
                    task_classes,
                    balance * m.balanced,
                    task_id=t,
                )
                return loss + m.keys * (1 - key_cosine(fv.mean(axis=(0, 1, 2)), ad.keys, t, active))

            return jnp.mean(jax.vmap(video)(*batch_))

        def batch_fn(_t, k):
            idx = jax.random.randint(k, (batch,), 0, feats.shape[0])
            return feats[idx], inst[idx], cls[idx]

        res = fit(loss_fn, trainable, optimizer, steps=steps, key=key, batch_fn=batch_fn)
        params, new_ad = merged(res.params)

        def leak(x, p, experts):
            # Expert t's output on the earlier inputs' own principal subspace, relative to its
            # output on the inputs: exactly 0 under SCOA, O(1) without it.
            u = input_subspace(x, energy=energy, max_rank=cfg.dim - cfg.rank)
            w = p[t] @ experts.down[t] @ experts.up[t]
            return jnp.linalg.norm(x @ u @ u.T @ w) / (jnp.linalg.norm(x @ w) + 1e-30)

        leaks = jnp.stack(
            [leak(pix, proj.frame, new_ad.frame), leak(qry, proj.video, new_ad.video)]
        )
        return Adapted(params, new_ad, proj, res.losses, res.finite, leaks)

    return jax.vmap(one)(params, adapters, proj, feats, inst, cls, earlier, keys, method, lr)


def key_cosine(summary, keys, t, active):
    """L2P's key-query match of a video summary ``[D]`` with key ``t`` of ``keys [E, D]``: the
    cosine about the centre of the ``active`` keys, the same cosine the router retrieves by
    (:func:`jaxpapers.steam.route`), so the pull moves the key in the geometry it is read in."""
    on = jnp.asarray(active, keys.dtype)
    centre = (on @ keys) / jnp.maximum(jnp.sum(on), 1.0)
    g, k = summary - centre, keys[t] - centre
    return g @ k / ((jnp.linalg.norm(g) + 1e-12) * (jnp.linalg.norm(k) + 1e-12))


def _task_miou(confusion: jax.Array, labels: jax.Array) -> jax.Array:
    """mIoU over a task's labels (background and its classes) from a confusion matrix.

    :func:`jaxpapers.core.segmentation_metrics.iou_from_confusion` gives every label's IoU (0
    for a label absent from truth and prediction); the task's mIoU averages its own labels, so a
    pixel of the task's class predicted as another task's class costs that class's IoU once.
    """
    iou, _present = iou_from_confusion(confusion)
    return jnp.mean(iou[labels])


@functools.partial(jax.jit, static_argnames=("cfg",))
def evaluate(
    params, adapters, proj, feats, inst, cls, allowed, active, hard, gates, oracle, *, cfg
):
    """Per run (leading axis of all but ``allowed``/``active``) and task: mIoU, identity switches
    and pairs, and the fraction of the task's videos routed to the task's own expert (largest
    video-level weight); ``feats [runs, tasks, N, T, g, g, D]``. A run with ``oracle [runs]``
    = 1 routes every video of task ``j`` to expert ``j`` (``decode(..., task_id=j)``) instead of
    by its router (its routing fraction is then 1 by construction)."""
    labels = [label_ids(task) for task in TASKS]

    def run(params, adapters, proj, feats, inst, cls, hard, gates, oracle):
        def video(f, i, c, j):
            out = decode(
                params,
                adapters,
                proj,
                f,
                config=cfg,
                active=active,
                hard=hard,
                task_classes=gates,
                task_id=jnp.where(oracle > 0, j, -1),
            )
            seg = segment(out, allowed)
            sw = identity_switches(seg.tracks, i, cfg.max_objects, cfg.queries)
            routed = jnp.argmax(out.video_weights)
            return confusion_matrix(seg.semantic, c, cfg.classes + 1), sw, routed

        res = []
        for j in range(len(TASKS)):
            confusion, sw, routed = jax.vmap(functools.partial(video, j=j))(
                feats[j], inst[j], cls[j]
            )
            res.append(
                (
                    _task_miou(confusion.sum(0), labels[j]),
                    sw.switches.sum(),
                    sw.pairs.sum(),
                    jnp.mean(routed == j),
                )
            )
        return tuple(jnp.stack(v) for v in zip(*res, strict=True))

    return jax.vmap(run)(params, adapters, proj, feats, inst, cls, hard, gates, oracle)


@functools.partial(jax.jit, static_argnames=("cfg",))
def path_outputs(params, adapters, proj, feats, active, hard, gates, task_id, *, cfg):
    """Per run (leading axis of all but ``active``) and video of one task (``feats [runs, N, T,
    g, g, D]``): class logits ``[N, T, Q, C + 1]``, mask logits ``[N, T, Q, H, W]`` and the
    video-level routing weights ``[N, E]``: what an old video's path produces. ``task_id
    [runs]``: the task every video of a run is routed to (oracle routing), negative: the router.
    """

    def run(params, adapters, proj, feats, hard, gates, tid):
        def video(f):
            out = decode(
                params,
                adapters,
                proj,
                f,
                config=cfg,
                active=active,
                hard=hard,
                task_classes=gates,
                task_id=tid,
            )
            return out.class_logits, out.mask_logits, out.video_weights

        return jax.vmap(video)(feats)

    return jax.vmap(run)(params, adapters, proj, feats, hard, gates, task_id)


#: A video is routed to a task when the task's video-level weight is at least ``1 - ROUTED_TOL``:
#: the soft router's output is that task's one-hot vector to float32 round-off.
ROUTED_TOL = 1e-6


def routed_to(weights: np.ndarray, task: int) -> np.ndarray:
    """``[N]`` whether each video's routing weights ``[N, E]`` put all but ``ROUTED_TOL`` of the
    weight on ``task``."""
    return np.asarray(weights)[:, task] >= 1 - ROUTED_TOL


def path_change(
    before: tuple[np.ndarray, np.ndarray, np.ndarray],
    after: tuple[np.ndarray, np.ndarray, np.ndarray],
    task: int,
    classes: tuple[int, ...],
    *,
    routed: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Per test video of task ``task``: the relative change of one run's outputs between right
    after learning the task (``before``) and later (``after``), from :func:`path_outputs`, and
    whether the video counts.

    Compared, per video: the class logits of ``classes`` (every class seen right after the task)
    and of "no object", and the mask logits; the largest absolute change relative to the largest
    of them before (that video's). With ``routed``, a video counts when it is routed to its own
    task both times (:func:`routed_to`): the whole path it takes (routing, static and dynamic
    DASH, frame and video experts, prompts, the routed class prior, the frozen classifier
    columns) must then give the same outputs up to float round-off. Without, every video counts.

    Returns:
      ``(change [N], counts [N] bool)``.
    """
    c0, m0, r0 = (np.asarray(x) for x in before)
    c1, m1, r1 = (np.asarray(x) for x in after)
    n = r0.shape[0]
    ok = routed_to(r0, task) & routed_to(r1, task) if routed else np.ones(n, bool)
    cols = [*classes, c0.shape[-1] - 1]
    a0, a1 = c0[..., cols].reshape(n, -1), c1[..., cols].reshape(n, -1)
    b0, b1 = m0.reshape(n, -1), m1.reshape(n, -1)
    a0, a1, b0, b1 = (x.astype(np.float64) for x in (a0, a1, b0, b1))
    diff = np.maximum(np.abs(a1 - a0).max(1), np.abs(b1 - b0).max(1))
    scale = np.maximum(np.maximum(np.abs(a0).max(1), np.abs(b0).max(1)), 1e-30)
    return diff / scale, ok


def whole_path(reference, final, run: int, *, routed: bool) -> tuple[float, int, int]:
    """The whole-path row of one run: the mean, over the earlier tasks' test videos that count
    (:func:`path_change`), of each video's relative output change between right after its task
    (``reference[j]``) and after the last task (``final[j]``), both :func:`path_outputs` tuples
    with a leading run axis. Counted per video, so a task with no routed video does not make the
    row undefined; NaN only when no old video counts at all.

    Returns:
      ``(mean change, videos counted, old videos)``.
    """
    changes, oks = [], []
    for j in range(len(final)):
        ch, ok = path_change(
            tuple(x[run] for x in reference[j]),
            tuple(x[run] for x in final[j]),
            j,
            classes_up_to(j),
            routed=routed,
        )
        changes.append(ch)
        oks.append(ok)
    ch, ok = np.concatenate(changes), np.concatenate(oks)
    mean = float(ch[ok].mean()) if ok.any() else float("nan")
    return mean, int(ok.sum()), int(ok.size)


def background_only_miou(classes: jax.Array, num_labels: int) -> np.ndarray:
    """``[task, seed]`` mIoU of the all-background prediction on each task's test class maps
    ``classes [seeds, tasks, N, T, H, W]``, scored like the methods (the task's labels).

    A majority-class reference shown in the extras: predicting background everywhere gives the
    background IoU (its pixel share) and 0 on every object class. (``learns_tasks`` judges the
    learning gain instead: a pretrained model can beat this reference without learning a task.)
    """
    out = np.zeros((len(TASKS), classes.shape[0]))
    for j, task in enumerate(TASKS):
        for s in range(classes.shape[0]):
            target = classes[s, j]
            confusion = confusion_matrix(jnp.zeros_like(target), target, num_labels)
            out[j, s] = float(_task_miou(confusion, label_ids(task)))
    return out


def run_protocol(config: Config, seeds: list[int]) -> Protocol:
    """Every method on the task sequence at every grid learning rate, per seed; each method's
    rows are those of its grid point with the best validation final average mIoU (see the module
    docstring and :class:`Config`)."""
    cfg = VISConfig(
        size=config.size,
        width=config.width,
        dim=config.dim,
        queries=config.queries,
        classes=NUM_CLASSES,
        experts=len(TASKS),
        rank=config.rank,
        temperature=config.temperature,
    )
    n_seeds, lrs, names = len(seeds), tuple(config.lrs), list(ADAPTER_METHODS)
    ft_lrs = config.grid(FINETUNE)
    n_lr, n_m = len(lrs), len(names)
    # Runs: fine-tuning at grid point g, seed s is run g * S + s (n_ft of them); adapter method
    # m at grid point g, seed s is run (m * G + g) * S + s of the n_ad adapter runs. Scoring
    # appends the adapter runs once more (n_or of them), routed by the oracle (``ORACLES``).
    n_ft, n_ad = n_lr * n_seeds, n_m * n_lr * n_seeds
    # L2P's runs (the first adapter block) are not oracle-scored (no row of theirs needs it).
    assert names[0] == L2P
    skip = n_lr * n_seeds
    n_or = n_ad - skip
    n_train, n_val, n_test = config.train_videos, config.val_videos, config.test_videos
    clock = _Clock()

    @jax.jit
    def make_data(key):
        ks = jax.random.split(key, len(TASKS))
        return [
            task_videos(task, n_train + n_val + n_test, config.frames, cfg.size, key=k)
            for task, k in zip(TASKS, ks, strict=True)
        ]

    videos = stack_trees([make_data(jax.random.key(1000 + s)) for s in seeds])

    @jax.jit
    def split(videos):
        def cut(a, b):
            return [jax.tree.map(lambda x: x[:, a:b], v) for v in videos]

        images = jnp.stack([v.image for v in videos], 1)  # [seeds, tasks, N, T, H, W, C]
        return cut(0, n_train), cut(n_train + n_val, None), images, images[:, :, n_train:]

    train, test, all_images, eval_images = split(videos)
    test_inst = jnp.stack([v.instances for v in test], 1)  # [seeds, tasks, N, T, H, W]
    test_cls = jnp.stack([v.classes for v in test], 1)
    val_inst = jnp.stack([v.instances[:, n_train : n_train + n_val] for v in videos], 1)
    val_cls = jnp.stack([v.classes[:, n_train : n_train + n_val] for v in videos], 1)
    clock("data")

    graphdef = None
    base = []
    for s in seeds:
        graphdef, p = init_vis(config=cfg, key=jax.random.key(s))
        base.append(p)
    params = stack_trees(base)
    identity_ad = init_adapters(config=cfg, key=jax.random.key(0))
    identity_proj = identity_projectors(config=cfg)
    init_adapter_runs = jax.jit(jax.vmap(lambda k: init_adapters(config=cfg, key=k)))

    def keys(offset, n):
        return jnp.stack([jax.random.key(7919 * s + offset) for s in seeds] * n)

    def rep(tree, n):  # seeds -> n blocks of seeds
        return jax.tree.map(lambda x: jnp.concatenate([x] * n), tree)

    def tune(p, task: int, lr: float, k: jax.Array) -> FitResult:
        # Class-incremental: the softmax runs over every class seen up to this task.
        return finetune(
            p,
            identity_ad,
            identity_proj,
            train[task].image,
            train[task].instances,
            train[task].classes,
            class_mask(set(classes_up_to(task))),
            jnp.full((n_seeds,), lr),
            k,
            cfg=cfg,
            graphdef=graphdef,
            steps=config.task_steps,
            batch=config.batch,
        )

    encode_all = jax.jit(
        jax.vmap(lambda p, x: jax.vmap(jax.vmap(lambda v: encode(graphdef, p, v)))(x))
    )

    init_params = params  # the model before pretraining: the "before" of task 1's learning gain
    pre_losses = []
    for chunk in range(max(1, config.pretrain_steps // config.task_steps)):
        res = tune(params, 0, config.lr, keys(11 + 100 * chunk, 1))
        params = res.params
        pre_losses.append(res.losses)
    clock("pretrain")

    feats = encode_all(params, all_images)  # [seeds, tasks, N, T, g, g, D]
    base_train = [feats[:, j, :n_train] for j in range(len(TASKS))]
    base_val = feats[:, :, n_train : n_train + n_val]
    base_test = feats[:, :, n_train + n_val :]
    blocks = n_m * n_lr  # adapter runs per seed
    ad_test, ad_val = rep(base_test, blocks), rep(base_val, blocks)
    ft_params = [params] * n_lr
    ad_params = rep(params, blocks)
    ad = init_adapter_runs(keys(13, blocks))
    proj = jax.vmap(lambda _: identity_projectors(config=cfg))(jnp.arange(n_ad))
    flags = method_flags([m for m in ADAPTER_METHODS.values() for _ in range(n_lr * n_seeds)])
    ad_lr = jnp.asarray([lr for m in names for lr in config.grid(m) for _ in seeds], jnp.float32)
    earlier = rep(jnp.stack([f[:, : config.subspace_videos] for f in base_train], 1), blocks)
    zero_ad = init_adapter_runs(keys(0, n_lr))
    eye = jax.vmap(lambda _: identity_projectors(config=cfg))(jnp.arange(n_ft))
    task_classes = jnp.stack([class_mask(task.pool) for task in TASKS])
    steam_i = names.index(STEAM)
    steam = slice(steam_i * n_lr * n_seeds, (steam_i + 1) * n_lr * n_seeds)  # of adapter runs
    gates = _cat(
        jnp.ones((n_ft, *task_classes.shape)),
        jnp.broadcast_to(task_classes, (n_ad + n_or, *task_classes.shape)),
    )
    hard = _cat(_cat(jnp.zeros(n_ft), flags.hard), flags.hard[skip:])
    runs = n_ft + n_ad + n_or
    oracle = (jnp.arange(runs) >= n_ft + n_ad).astype(jnp.float32)
    inst_all, cls_all = rep(test_inst, runs // n_seeds), rep(test_cls, runs // n_seeds)
    val_inst_all, val_cls_all = rep(val_inst, runs // n_seeds), rep(val_cls, runs // n_seeds)
    n_st = n_lr * n_seeds  # STEAM's runs
    path_gates = _cat(
        jnp.ones((n_ft, *task_classes.shape)),
        jnp.broadcast_to(task_classes, (2 * n_st, *task_classes.shape)),
    )
    path_feats = rep(base_test, 2 * n_lr)

    def ft_eval_feats(ps):  # fine-tuning runs' (val, test) features [n_ft, tasks, N, ...]
        f = jnp.concatenate([encode_all(p, eval_images) for p in ps])
        return f[:, :, :n_val], f[:, :, n_val:]

    def outputs(j, active):
        # Fine-tuning's and STEAM's outputs on task j's test videos: STEAM's runs routed, then
        # the same runs oracle-routed (every video to task j).
        def twice(tree):
            return _cat(*([jax.tree.map(lambda x: x[steam], tree)] * 2))

        return jax.device_get(
            path_outputs(
                _cat(_cat_all(ft_params), twice(ad_params)),
                _cat(zero_ad, twice(ad)),
                _cat(eye, twice(proj)),
                _cat(ft_test[:, j], path_feats[:, j]),
                active,
                jnp.zeros(n_ft + 2 * n_st),
                path_gates,
                jnp.concatenate(
                    [jnp.full(n_ft + n_st, -1, jnp.int32), jnp.full(n_st, j, jnp.int32)]
                ),
                cfg=cfg,
            )
        )

    def with_oracle(tree):  # the adapter runs, then all but L2P's again (scored oracle-routed)
        return _cat(tree, jax.tree.map(lambda x: x[skip:], tree))

    def score(ft_p, ft_feats, ad_p, ad_a, ad_proj, ad_feats, inst, cls, seen_mask, active):
        out = evaluate(
            _cat(ft_p, with_oracle(ad_p)),
            _cat(zero_ad, with_oracle(ad_a)),
            _cat(eye, with_oracle(ad_proj)),
            _cat(ft_feats, with_oracle(ad_feats)),
            inst,
            cls,
            seen_mask,
            active,
            hard,
            gates,
            oracle,
            cfg=cfg,
        )
        return [np.asarray(x) for x in out]  # each [runs, tasks]

    reference: list = []
    final: list = []
    pre_runs, stage_runs = [], []
    ft_losses: dict[str, list] = {}
    ad_losses: dict[str, np.ndarray] = {}
    leak_runs: dict[str, np.ndarray] = {}
    seen: set[int] = set()
    _init_val, init_test = ft_eval_feats([init_params])
    ft_test = rep(init_test, n_lr)
    val_final = np.zeros(runs)
    for t, task in enumerate(TASKS):
        new = tuple(sorted(set(task.pool) - seen))
        seen |= set(task.pool)
        active = (jnp.arange(cfg.experts) <= t).astype(jnp.float32)
        seen_mask = class_mask(seen)
        # The learning gain's "before": every model just before it learns task t (task 1: the
        # untrained initialisation, before pretraining), scored on task t with the same label
        # mask and active experts as right after learning it.
        if t == 0:
            pre = score(
                rep(init_params, n_lr),
                ft_test,
                rep(init_params, blocks),
                ad,
                proj,
                rep(init_test, blocks),
                inst_all,
                cls_all,
                seen_mask,
                active,
            )
        else:
            pre = score(
                _cat_all(ft_params),
                ft_test,
                ad_params,
                ad,
                proj,
                ad_test,
                inst_all,
                cls_all,
                seen_mask,
                active,
            )
        pre_runs.append(pre[0][:, t])
        clock(f"before stage {t + 1}")
        if t > 0:
            losses_t = []
            for g, lr in enumerate(ft_lrs):
                res = tune(ft_params[g], t, lr, keys(17 + t, 1))
                ft_params[g] = res.params
                losses_t.append(np.asarray(res.losses))
            ft_losses[f"task{t + 1}_finetune"] = losses_t
            clock(f"stage {t + 1}: fine-tuning")
            adapted = adapt(
                ad_params,
                ad,
                proj,
                rep(base_train[t], blocks),
                rep(train[t].instances, blocks),
                rep(train[t].classes, blocks),
                earlier,
                seen_mask,
                class_mask(new),
                task_classes,
                keys(23 + t, blocks),
                flags,
                ad_lr,
                t,
                cfg=cfg,
                steps=config.task_steps,
                batch=config.batch,
                energy=config.energy,
                balance=config.balance,
            )
            ad_params, ad, proj = adapted.params, adapted.adapters, adapted.projectors
            leak_runs[f"task{t + 1}"] = np.asarray(adapted.leaks, np.float64)
            ad_losses[f"task{t + 1}_adapters"] = np.asarray(adapted.losses)
            clock(f"stage {t + 1}: adapters")
        ft_val, ft_test = ft_eval_feats(ft_params)
        args = (_cat_all(ft_params), ft_test, ad_params, ad, proj, ad_test)
        stage_runs.append(score(*args, inst_all, cls_all, seen_mask, active))
        reference.append(outputs(t, active))
        if t == len(TASKS) - 1:
            final = [outputs(j, active) for j in range(t)]
            val = score(
                *args[:1], ft_val, *args[2:5], ad_val, val_inst_all, val_cls_all, seen_mask, active
            )
            val_final = val[0].mean(1)  # final average mIoU on the validation videos, per run
        clock(f"stage {t + 1}: scoring")

    # Tuning: per method, the grid point with the best seed-mean validation final average mIoU.
    tuning: dict[str, Any] = {"lrs": {}, "selected": {}, "validation": {}, "at grid edge": []}
    chosen: dict[str, np.ndarray] = {}  # method -> [seeds] run indices (of all runs)
    for i, name in enumerate(METHODS):
        offset = 0 if i == 0 else n_ft + (i - 1) * n_lr * n_seeds
        grid = config.grid(name)
        g, block = select_grid_point(val_final[offset : offset + n_lr * n_seeds], n_lr)
        chosen[name] = offset + g * n_seeds + np.arange(n_seeds)
        tuning["lrs"][name] = list(grid)
        tuning["selected"][name] = grid[g]
        tuning["validation"][name] = block.tolist()
        if n_lr > 1 and g in (0, n_lr - 1):
            tuning["at grid edge"].append(name)
    # An oracle row is its method's selected runs, scored with the true task id (not tuned).
    for name in ORACLES:
        chosen[ORACLES[name]] = chosen[name] + n_ad - skip
    tuning["oracle rows"] = "STEAM's and its ablations' selected runs, oracle-routed at test time"

    shape = (len(ROWS), len(TASKS), len(TASKS), n_seeds)
    acc, sw, pairs, routed = (np.zeros(shape) for _ in range(4))
    before_acc = np.zeros((len(ROWS), len(TASKS), n_seeds))
    for i, name in enumerate(ROWS):
        idx = chosen[name]
        for t in range(len(TASKS)):
            before_acc[i, t] = pre_runs[t][idx]
            for k, arr in enumerate((acc, sw, pairs, routed)):
                arr[i, t] = stage_runs[t][k][idx].T

    ft_g = (chosen[FINETUNE][0]) // n_seeds
    st_g = (chosen[STEAM][0] - n_ft - steam.start) // n_seeds
    change: dict[str, list[float]] = {FINETUNE: [], STEAM: [], ORACLE: []}
    path_routed: list[float] = []
    path_videos = 0
    for s in range(n_seeds):
        ft_mean, _, _ = whole_path(reference, final, ft_g * n_seeds + s, routed=False)
        st_mean, count, path_videos = whole_path(
            reference, final, n_ft + st_g * n_seeds + s, routed=True
        )
        or_mean, _, _ = whole_path(reference, final, n_ft + n_st + st_g * n_seeds + s, routed=False)
        change[FINETUNE].append(ft_mean)
        change[STEAM].append(st_mean)
        change[ORACLE].append(or_mean)
        path_routed.append(count)

    ad_idx = {m: chosen[m] - n_ft for m in names}
    leaks = {k: np.stack([v[ad_idx[m]] for m in names]) for k, v in leak_runs.items()}
    losses = {"pretrain": np.concatenate([np.asarray(x) for x in pre_losses], 1).mean(0)}
    for k, v in ft_losses.items():
        losses[k] = v[ft_g].mean(0)
    for k, v in ad_losses.items():
        losses[k] = np.stack([v[ad_idx[m]].mean(0) for m in names])
    st = ad_idx[STEAM]
    slope_norms = {
        part: [[float(np.linalg.norm(x[i, t] - shift)) for i in st] for t in range(len(TASKS))]
        for part, x, shift in (
            ("dynamic G (d gamma / d g)", np.asarray(ad.slope.gamma), 0.0),
            ("dynamic H (d beta / d g)", np.asarray(ad.slope.beta), 0.0),
            ("static gamma - 1", np.asarray(ad.dash.gamma), 1.0),
            ("static beta", np.asarray(ad.dash.beta), 0.0),
        )
    }
    fold = _fold_errors(
        graphdef,
        params,
        ScaleShift(ad.dash.gamma[st, 1], ad.dash.beta[st, 1]),
        test[1].image[:, 0],
    )
    return Protocol(
        methods=ROWS,
        tasks=tuple(task.name for task in TASKS),
        miou=acc,
        miou_before=before_acc,
        switches=sw,
        pairs=pairs,
        routed=routed,
        path_change=change,
        path_routed=path_routed,
        losses=losses,
        leaks=leaks,
        background_only_miou=background_only_miou(test_cls, cfg.classes + 1),
        fold_error=np.asarray(fold, np.float64).tolist(),
        cpu_seconds=clock.laps,
        path_videos=path_videos,
        tuning=tuning,
        slope_norms=slope_norms,
        probe=_probe(base_train, base_test),
    )


def probe_accuracy(x_train, y_train, x_test, y_test, *, l2: float = 1e-3) -> float:
    """Test accuracy of multinomial logistic regression (features standardised on the training
    rows; L-BFGS on the mean cross-entropy plus ``l2 * |W|^2 / 2``): how well a linear read-out
    of the features separates the labels, a ceiling for a nearest-key router on them."""
    from scipy.optimize import minimize

    x_train, x_test = (np.asarray(x, np.float64) for x in (x_train, x_test))
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-9
    a, b = (x_train - mu) / sd, (x_test - mu) / sd
    n, d = a.shape
    k = int(max(y_train.max(), y_test.max())) + 1
    onehot = np.eye(k)[y_train]
    a1 = np.concatenate([a, np.ones((n, 1))], 1)

    def loss(w):
        w = w.reshape(d + 1, k)
        z = a1 @ w
        z = z - z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        reg = 0.5 * l2 * np.sum(w[:-1] ** 2)
        grad = a1.T @ (np.exp(logp) - onehot) / n
        grad[:-1] += l2 * w[:-1]
        return -np.mean(np.sum(onehot * logp, 1)) + reg, grad.ravel()

    w = minimize(loss, np.zeros((d + 1) * k), jac=True, method="L-BFGS-B").x.reshape(d + 1, k)
    pred = np.argmax(np.concatenate([b, np.ones((len(b), 1))], 1) @ w, 1)
    return float(np.mean(pred == y_test))


def _summaries(feats) -> dict[str, np.ndarray]:
    """Per video of ``feats [N, T, g, g, D]``: the router's pooled mean ``[N, D]`` and it with
    the spatial standard deviation averaged over frames ``[N, 2D]``."""
    f = np.asarray(feats, np.float64)
    mean = f.mean(axis=(1, 2, 3))
    return {
        "pooled mean": mean,
        "mean + spatial std": np.concatenate([mean, f.std(axis=(2, 3)).mean(1)], 1),
    }


def _probe(train_feats, test_feats) -> dict[str, list[float]]:
    """Per seed: :func:`probe_accuracy` of the task from each summary, trained on the training
    videos ``train_feats`` (list per task of ``[seeds, N, ...]``), tested on the test videos
    ``test_feats [seeds, tasks, N, ...]``."""
    out: dict[str, list[float]] = {}
    for s in range(test_feats.shape[0]):
        tr = [_summaries(f[s]) for f in train_feats]
        te = [_summaries(test_feats[s, j]) for j in range(test_feats.shape[1])]
        y_tr = np.concatenate([np.full(len(x["pooled mean"]), j) for j, x in enumerate(tr)])
        y_te = np.concatenate([np.full(len(x["pooled mean"]), j) for j, x in enumerate(te)])
        for name in tr[0]:
            acc = probe_accuracy(
                np.concatenate([x[name] for x in tr]),
                y_tr,
                np.concatenate([x[name] for x in te]),
                y_te,
            )
            out.setdefault(name, []).append(acc)
    return out


def select_grid_point(validation: np.ndarray, n_points: int) -> tuple[int, np.ndarray]:
    """One method's tuned grid point: ``validation [G * S]`` holds each run's validation score
    (grid point ``g``, seed ``s`` at ``g * S + s``; higher is better). Returns the point with the
    best seed mean (one point for every seed, not one per seed) and the seed means ``[G]``."""
    v = np.asarray(validation, np.float64)
    if v.ndim != 1 or v.size % n_points:
        raise ValueError(f"validation has shape {v.shape}; expected [G * S] with G={n_points}")
    means = v.reshape(n_points, -1).mean(1)
    return int(np.argmax(means)), means


def _cat(a, b):
    return jax.tree.map(lambda x, y: jnp.concatenate([x, y]), a, b)


def _cat_all(trees):
    return jax.tree.map(lambda *x: jnp.concatenate(x), *trees)


class _Clock:
    """Process CPU seconds per phase (compiles included), reported in the extras."""

    def __init__(self) -> None:
        self.last = time.process_time()
        self.laps: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        now = time.process_time()
        self.laps[name] = round(now - self.last, 2)
        self.last = now


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _fold_errors(graphdef, params, ss: ScaleShift, videos):
    """Per seed (leading axes): max relative difference between a DASH map ``ss`` applied after
    the neck and folded into it, on one video ``[T, H, W, C]``."""

    def one(p, ss, video):
        applied = scale_shift(encode(graphdef, p, video), ss)
        kernel, bias = fold_scale_shift(p["neck"]["kernel"], p["neck"]["bias"], ss)
        folded = encode(graphdef, {**p, "neck": {"kernel": kernel, "bias": bias}}, video)
        return jnp.max(jnp.abs(applied - folded)) / jnp.max(jnp.abs(applied))

    return jax.vmap(one)(params, ss, videos)
