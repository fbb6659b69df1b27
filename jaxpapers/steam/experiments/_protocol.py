"""The continual protocol: pretrain on task 1, then learn tasks 2 and 3 with every method.

Training is :func:`jaxpapers.core.fit.fit` throughout. ``finetune`` trains every weight from the
images (pretraining and sequential fine-tuning, vmapped over seeds). ``adapt`` trains one adapter
method on one task from features the frozen base computed once per seed (vmapped over seeds): its
parameters are the new task's row of every adapter part and the classifier columns of the task's
new classes, and ``optax.multi_transform`` gives the parts the method does not train
``optax.set_to_zero`` (they keep their values exactly). One compiled ``evaluate`` scores every
run on every task's test videos after every stage.
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
    matching_loss,
    orthogonal_projector,
    scale_shift,
    segment,
)
from jaxpapers.steam.experiments._tasks import TASKS, class_mask, label_ids, task_videos


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Every size-dependent setting of the P08 protocol (one per run size, ``SIZES``)."""

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
    queries: int = 4
    temperature: float = 0.1
    lr: float = 3e-3
    ft_lr: float = 3e-3
    adapter_lr: float = 1e-2
    energy: float = 0.99


class Method(NamedTuple):
    """An adapter method: which parts of the new task's expert train, hard (L2P) retrieval, SCOA.

    A static argument of ``adapt``: the parts that do not train get ``optax.set_to_zero``.
    """

    dash: bool = False
    frame: bool = False
    video: bool = False
    prompt: bool = False
    keys: bool = False
    hard: bool = False
    scoa: bool = False


FINETUNE = "sequential fine-tuning"
L2P = "L2P prompt retrieval"
STEAM = "STEAM"
NO_DASH = "STEAM w/o DASH"
NO_TEMPORAL = "STEAM w/o temporal experts"
NO_SCOA = "STEAM w/o SCOA"
ADAPTER_METHODS: dict[str, Method] = {
    L2P: Method(prompt=True, keys=True, hard=True),
    STEAM: Method(dash=True, frame=True, video=True, scoa=True),
    NO_DASH: Method(frame=True, video=True, scoa=True),
    NO_TEMPORAL: Method(dash=True, frame=True, scoa=True),
    NO_SCOA: Method(dash=True, frame=True, video=True),
}
METHODS: tuple[str, ...] = (FINETUNE, *ADAPTER_METHODS)


class Protocol(NamedTuple):
    """Every method on the task sequence (per seed); what the experiments read.

    Attributes:
      methods: row names, ``METHODS`` order.
      tasks: task names.
      miou: ``[method, stage, task, seed]`` mIoU of each task after each stage.
      miou_before: ``[method, task, seed]`` mIoU of each task just before learning it.
      switches, pairs: ``[method, stage, task, seed]`` identity switches and tracked pairs.
      losses: training losses by phase (seed means; adapters ``[method, step]``).
      leaks: per task, ``[adapter method, seed, (frame, video)]`` relative output of the new
        expert on the earlier inputs' subspace.
      background_only_miou: ``[task, seed]`` mIoU of the all-background prediction.
      fold_error: ``[seed]`` DASH folded into the neck vs applied after it.
      cpu_seconds: process CPU seconds per phase (compiles included).
    """

    methods: tuple[str, ...]
    tasks: tuple[str, ...]
    miou: np.ndarray
    miou_before: np.ndarray
    switches: np.ndarray
    pairs: np.ndarray
    losses: dict[str, np.ndarray]
    leaks: dict[str, np.ndarray]
    background_only_miou: np.ndarray
    fold_error: list[float]
    cpu_seconds: dict[str, float]


def _video_loss(cfg, params, adapters, proj, feats, inst, cls, allowed, active, hard, gates=None):
    assign = jnp.asarray(assignments(cfg.queries, cfg.max_objects))
    out = decode(
        params, adapters, proj, feats, config=cfg, active=active, hard=hard, task_classes=gates
    )
    per_frame = jax.vmap(matching_loss, in_axes=(0, 0, 0, 0, None, None))(
        out.class_logits, out.mask_logits, inst, cls, allowed, assign
    )
    return jnp.mean(per_frame), out


@functools.partial(jax.jit, static_argnames=("cfg", "graphdef", "steps", "batch"))
def finetune(
    params, adapters, proj, images, inst, cls, allowed, lr, keys, *, cfg, graphdef, steps, batch
) -> FitResult:
    """Adam on every base weight from images, one run per seed (leading axis of ``params``,
    ``images [S, N, T, H, W, C]``, ``inst``, ``cls`` and ``keys``); ``adapters``/``proj`` are
    the identity ones (only task 1's expert active)."""
    active = jax.nn.one_hot(0, cfg.experts)

    def one(p0, im, ins, cl, key):
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

        return fit(loss_fn, p0, optax.adam(lr), steps=steps, key=key, batch_fn=batch_fn)

    return jax.vmap(one)(params, images, inst, cls, keys)


def _summary(feats: jax.Array) -> jax.Array:
    """Mean pooled feature of a batch of videos ``[N, T, g, g, D]``."""
    return feats.mean(axis=(0, 1, 2, 3))


def _row(adapters: Adapters, t: int) -> Adapters:
    """Task ``t``'s row of every adapter part."""
    return jax.tree.map(lambda x: x[t], adapters)


def _with_row(adapters: Adapters, t: int, row: Adapters) -> Adapters:
    return jax.tree.map(lambda x, r: x.at[t].set(r), adapters, row)


def _labels(method: Method) -> Adapters:
    """``multi_transform`` labels of an expert row: the parts ``method`` trains."""

    def label(on: bool) -> str:
        return "train" if on else "frozen"

    return Adapters(
        dash=ScaleShift(label(method.dash), label(method.dash)),
        frame=Experts(label(method.frame), label(method.frame)),
        video=Experts(label(method.video), label(method.video)),
        keys=label(method.keys),
        prompts=label(method.prompt),
    )


class Adapted(NamedTuple):
    """One adapter method's run on one task (per seed): the base parameters (new-class columns
    of the classifier trained), the adapters (task ``t``'s row trained), the projectors, the
    losses, whether every step was finite, and the new experts' leaks ``[(frame, video)]``."""

    params: Any
    adapters: Adapters
    projectors: Projectors
    losses: jax.Array
    finite: jax.Array
    leaks: jax.Array


@functools.partial(
    jax.jit,
    static_argnames=("cfg", "method", "t", "new", "steps", "batch", "lr", "energy"),
)
def adapt(
    params,
    adapters: Adapters,
    proj: Projectors,
    feats,
    inst,
    cls,
    earlier,
    allowed,
    task_classes,
    keys,
    *,
    cfg: VISConfig,
    method: Method,
    t: int,
    new: tuple[int, ...],
    steps: int,
    batch: int,
    lr: float,
    energy: float,
) -> Adapted:
    """``method`` learns task ``t`` (new classes ``new``), one run per seed (leading axes).

    Before training: DASH of task ``t`` is initialised from the task's feature moments against
    task 1's (when the method uses DASH); the routing keys of task 1 and ``t`` are set to their
    tasks' mean features; with SCOA, expert ``t``'s projectors remove the subspace of the
    frame / video expert inputs of tasks ``< t`` (computed on ``earlier`` videos under the current
    model). Then Adam trains the parts of row ``t`` that the method names and the classifier
    columns of the new classes; the other parts of the row get zero updates.
    """
    hard = float(method.hard)
    optimizer = optax.multi_transform(
        {"train": optax.adam(lr), "frozen": optax.set_to_zero()},
        {"row": _labels(method), **({"cls": {"kernel": "train", "bias": "train"}} if new else {})},
    )
    cols = jnp.asarray(new, jnp.int32)

    def one(params, adapters, proj, feats, inst, cls, earlier, key):
        e = cfg.experts
        before = (jnp.arange(e) < t).astype(jnp.float32)
        active = (jnp.arange(e) <= t).astype(jnp.float32)
        keys_ = adapters.keys.at[0].set(_summary(earlier[0])).at[t].set(_summary(feats))
        dash = adapters.dash
        if method.dash:
            mean0, std0 = feature_moments(earlier[0])
            init = dash_init(feats, mean0, std0)
            dash = ScaleShift(dash.gamma.at[t].set(init.gamma), dash.beta.at[t].set(init.beta))
        adapters = adapters._replace(keys=keys_, dash=dash)

        # SCOA: the inputs expert t must not disturb are those of the earlier tasks' videos.
        rows = jax.vmap(
            jax.vmap(
                lambda f: adapter_inputs(
                    params, adapters, proj, f, config=cfg, active=before, hard=hard
                )
            )
        )(earlier)
        weight = before[:, None, None, None]
        pix = (rows[0] * weight).reshape(-1, cfg.dim)
        qry = (rows[1] * weight).reshape(-1, cfg.dim)
        if method.scoa:
            span = functools.partial(input_subspace, energy=energy, max_rank=cfg.dim - cfg.rank)
            pf, pv = orthogonal_projector(span(pix)), orthogonal_projector(span(qry))
        else:
            pf = pv = jnp.eye(cfg.dim)
        proj = Projectors(proj.frame.at[t].set(pf), proj.video.at[t].set(pv))

        trainable = {"row": _row(adapters, t)}
        if new:
            kernel, bias = params["cls"]["kernel"], params["cls"]["bias"]
            trainable["cls"] = {"kernel": kernel[:, cols], "bias": bias[cols]}

        def merged(tr):
            p = params
            if new:
                cls_ = {
                    "kernel": kernel.at[:, cols].set(tr["cls"]["kernel"]),
                    "bias": bias.at[cols].set(tr["cls"]["bias"]),
                }
                p = {**params, "cls": cls_}
            return p, _with_row(adapters, t, tr["row"])

        def loss_fn(tr, batch_, _key):
            p, ad = merged(tr)

            def video(fv, iv, cv):
                loss, _out = _video_loss(
                    cfg, p, ad, proj, fv, iv, cv, allowed, active, hard, task_classes
                )
                if method.keys:  # L2P's key-query matching term
                    s = fv.mean(axis=(0, 1, 2))
                    k = ad.keys[t]
                    loss = loss + (1 - s @ k / (jnp.linalg.norm(s) * jnp.linalg.norm(k) + 1e-6))
                return loss

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

    return jax.vmap(one)(params, adapters, proj, feats, inst, cls, earlier, keys)


def _task_miou(confusion: jax.Array, labels: jax.Array) -> jax.Array:
    """mIoU over a task's labels (background and its classes) from a confusion matrix.

    :func:`jaxpapers.core.segmentation_metrics.iou_from_confusion` gives every label's IoU (0
    for a label absent from truth and prediction); the task's mIoU averages its own labels, so a
    pixel of the task's class predicted as another task's class costs that class's IoU once.
    """
    iou, _present = iou_from_confusion(confusion)
    return jnp.mean(iou[labels])


@functools.partial(jax.jit, static_argnames=("cfg",))
def evaluate(params, adapters, proj, feats, inst, cls, allowed, active, hard, gates, *, cfg):
    """Per run (leading axis of all but ``allowed``/``active``) and task: mIoU, identity switches
    and pairs; ``feats [runs, tasks, N, T, g, g, D]``."""
    labels = [label_ids(task) for task in TASKS]

    def run(params, adapters, proj, feats, inst, cls, hard, gates):
        def video(f, i, c):
            out = decode(
                params, adapters, proj, f, config=cfg, active=active, hard=hard, task_classes=gates
            )
            seg = segment(out, allowed)
            sw = identity_switches(seg.tracks, i, cfg.max_objects, cfg.queries)
            return confusion_matrix(seg.semantic, c, cfg.classes + 1), sw

        res = []
        for j in range(len(TASKS)):
            confusion, sw = jax.vmap(video)(feats[j], inst[j], cls[j])
            res.append((_task_miou(confusion.sum(0), labels[j]), sw.switches.sum(), sw.pairs.sum()))
        return tuple(jnp.stack(v) for v in zip(*res, strict=True))

    return jax.vmap(run)(params, adapters, proj, feats, inst, cls, hard, gates)


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
    """Every method on the task sequence, per seed (see the module docstring)."""
    cfg = VISConfig(
        size=config.size,
        width=config.width,
        dim=config.dim,
        queries=config.queries,
        classes=4,
        experts=len(TASKS),
        rank=config.rank,
        temperature=config.temperature,
    )
    n_seeds = len(seeds)
    names = list(ADAPTER_METHODS)

    clock = _Clock()
    n_train = config.train_videos

    @jax.jit
    def make_data(key):
        ks = jax.random.split(key, len(TASKS))
        return [
            task_videos(task, n_train + config.test_videos, config.frames, cfg.size, key=k)
            for task, k in zip(TASKS, ks, strict=True)
        ]

    videos = stack_trees([make_data(jax.random.key(1000 + s)) for s in seeds])
    train = [jax.tree.map(lambda x: x[:, :n_train], v) for v in videos]
    test = [jax.tree.map(lambda x: x[:, n_train:], v) for v in videos]
    clock("data")

    graphdef = None
    base = []
    for s in seeds:
        graphdef, p = init_vis(config=cfg, key=jax.random.key(s))
        base.append(p)
    params = stack_trees(base)

    identity_ad = init_adapters(config=cfg, key=jax.random.key(0))
    identity_proj = identity_projectors(config=cfg)

    def tune(params, task: int, lr: float, keys: jax.Array) -> FitResult:
        return finetune(
            params,
            identity_ad,
            identity_proj,
            train[task].image,
            train[task].instances,
            train[task].classes,
            class_mask(TASKS[task].pool),
            lr,
            keys,
            cfg=cfg,
            graphdef=graphdef,
            steps=config.task_steps,
            batch=config.batch,
        )

    encode_all = jax.jit(
        jax.vmap(lambda p, x: jax.vmap(jax.vmap(lambda v: encode(graphdef, p, v)))(x))
    )
    all_images = jnp.stack([v.image for v in videos], 1)  # [seeds, tasks, N, T, H, W, C]

    def keys(offset, n):
        return jnp.stack([jax.random.key(7919 * s + offset) for s in seeds] * n)

    init_params = params  # the model before pretraining: the "before" of task 1's learning gain
    pre_losses = []
    for chunk in range(max(1, config.pretrain_steps // config.task_steps)):
        res = tune(params, 0, config.lr, keys(11 + 100 * chunk, 1))
        params = res.params
        pre_losses.append(res.losses)
    clock("pretrain")
    test_inst = jnp.stack([v.instances for v in test], 1)  # [seeds, tasks, N, T, H, W]
    test_cls = jnp.stack([v.classes for v in test], 1)

    def rep(tree):  # seeds -> runs (method-major: run r = method r // n_seeds, seed r % n_seeds)
        return jax.tree.map(lambda x: jnp.concatenate([x] * len(names)), tree)

    def runs_of(tree, i):  # the runs of adapter method i
        return jax.tree.map(lambda x: x[i * n_seeds : (i + 1) * n_seeds], tree)

    feats = encode_all(params, all_images)  # [seeds, tasks, N, T, g, g, D]
    base_train_feats = [feats[:, j, :n_train] for j in range(len(TASKS))]
    base_test_feats = feats[:, :, n_train:]
    clock("encode")
    ft_params = params
    ad_params = rep(params)
    ad = jax.vmap(lambda k: init_adapters(config=cfg, key=k))(keys(13, len(names)))
    proj = jax.vmap(lambda _: identity_projectors(config=cfg))(jnp.arange(len(names) * n_seeds))
    hard = jnp.repeat(jnp.asarray([float(m.hard) for m in ADAPTER_METHODS.values()]), n_seeds)
    earlier = jnp.stack([f[:, : config.subspace_videos] for f in base_train_feats], 1)
    zero_ad = jax.vmap(lambda k: init_adapters(config=cfg, key=k))(keys(0, 1))
    eye = jax.vmap(lambda _: identity_projectors(config=cfg))(jnp.arange(n_seeds))

    task_classes = jnp.stack([class_mask(task.pool) for task in TASKS])
    rep_gates = jnp.broadcast_to(task_classes, (len(names) * n_seeds, *task_classes.shape))
    acc = np.zeros((len(METHODS), len(TASKS), len(TASKS), n_seeds))
    sw = np.zeros_like(acc)
    pairs = np.zeros_like(acc)
    losses = {"pretrain": np.concatenate([np.asarray(x) for x in pre_losses], 1).mean(0)}
    leaks: dict[str, np.ndarray] = {}
    seen: set[int] = set()
    before_acc = np.zeros((len(METHODS), len(TASKS), n_seeds))

    def score(ft_p, ft_feats, ad_p, ad_a, ad_proj, ad_feats, seen_mask, active):
        return evaluate(
            _cat(ft_p, ad_p),
            _cat(zero_ad, ad_a),
            _cat(eye, ad_proj),
            _cat(ft_feats, ad_feats),
            _cat(test_inst, rep(test_inst)),
            _cat(test_cls, rep(test_cls)),
            seen_mask,
            active,
            _cat(jnp.zeros(n_seeds), hard),
            _cat(jnp.ones((n_seeds, *task_classes.shape)), rep_gates),
            cfg=cfg,
        )

    ft_test = encode_all(init_params, all_images)[:, :, n_train:]
    for t, task in enumerate(TASKS):
        new = tuple(sorted(set(task.pool) - seen))
        seen |= set(task.pool)
        allowed = class_mask(task.pool)
        active = jnp.broadcast_to(
            (jnp.arange(cfg.experts) <= t).astype(jnp.float32), (cfg.experts,)
        )
        seen_mask = class_mask(seen)
        # The learning gain's "before": every model just before it learns task t (task 1: the
        # untrained initialisation, before pretraining), scored on task t with the same label
        # mask and active experts as right after learning it.
        if t == 0:
            pre = score(
                init_params, ft_test, rep(init_params), ad, proj, rep(ft_test), seen_mask, active
            )
        else:
            pre = score(
                ft_params, ft_test, ad_params, ad, proj, rep(base_test_feats), seen_mask, active
            )
        miou_pre = np.asarray(pre[0])  # [runs, tasks]
        before_acc[0, t] = miou_pre[:n_seeds, t]
        before_acc[1:, t] = miou_pre[n_seeds:, t].reshape(len(names), n_seeds)
        clock(f"before stage {t + 1}")
        if t > 0:
            res = tune(ft_params, t, config.ft_lr, keys(17 + t, 1))
            ft_params = res.params
            losses[f"task{t + 1}_finetune"] = np.asarray(res.losses).mean(0)
            adapted = [
                adapt(
                    runs_of(ad_params, i),
                    runs_of(ad, i),
                    runs_of(proj, i),
                    base_train_feats[t],
                    train[t].instances,
                    train[t].classes,
                    earlier,
                    allowed,
                    task_classes,
                    keys(23 + t, 1),
                    cfg=cfg,
                    method=method,
                    t=t,
                    new=new,
                    steps=config.task_steps,
                    batch=config.batch,
                    lr=config.adapter_lr,
                    energy=config.energy,
                )
                for i, method in enumerate(ADAPTER_METHODS.values())
            ]
            ad_params, ad, proj = (
                jax.tree.map(lambda *x: jnp.concatenate(x), *[getattr(a, f) for a in adapted])
                for f in ("params", "adapters", "projectors")
            )
            leaks[f"task{t + 1}"] = np.stack([np.asarray(a.leaks, np.float64) for a in adapted])
            losses[f"task{t + 1}_adapters"] = np.stack(
                [np.asarray(a.losses).mean(0) for a in adapted]
            )
        ft_test = encode_all(ft_params, all_images)[:, :, n_train:]
        res = score(
            ft_params, ft_test, ad_params, ad, proj, rep(base_test_feats), seen_mask, active
        )
        clock(f"stage {t + 1}")
        res_ft = [x[:n_seeds] for x in res]
        res_ad = [x[n_seeds:] for x in res]
        for k, arr in enumerate((acc, sw, pairs)):
            arr[0, t] = np.asarray(res_ft[k]).T
            arr[1:, t] = np.asarray(res_ad[k]).reshape(len(names), n_seeds, -1).transpose(0, 2, 1)
    return Protocol(
        methods=METHODS,
        tasks=tuple(task.name for task in TASKS),
        miou=acc,
        miou_before=before_acc,
        switches=sw,
        pairs=pairs,
        losses=losses,
        leaks=leaks,
        background_only_miou=background_only_miou(test_cls, cfg.classes + 1),
        fold_error=_fold_error(graphdef, params, ad, test[1].image, n_seeds),
        cpu_seconds=clock.laps,
    )


def _cat(a, b):
    return jax.tree.map(lambda x, y: jnp.concatenate([x, y]), a, b)


class _Clock:
    """Process CPU seconds per phase (compiles included), reported in the extras."""

    def __init__(self) -> None:
        self.last = time.process_time()
        self.laps: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        now = time.process_time()
        self.laps[name] = round(now - self.last, 2)
        self.last = now


def _fold_error(graphdef, params, adapters, images, n_seeds) -> list[float]:
    """Per seed: max relative difference between STEAM's task-2 DASH applied after the neck and
    folded into it, on one test video."""
    out = []
    for s in range(n_seeds):
        p = jax.tree.map(lambda x, s=s: x[s], params)
        run = n_seeds * list(ADAPTER_METHODS).index(STEAM) + s
        ss = ScaleShift(adapters.dash.gamma[run, 1], adapters.dash.beta[run, 1])
        video = images[s, 0]
        applied = scale_shift(encode(graphdef, p, video), ss)
        kernel, bias = fold_scale_shift(p["neck"]["kernel"], p["neck"]["bias"], ss)
        folded = encode(graphdef, {**p, "neck": {"kernel": kernel, "bias": bias}}, video)
        out.append(float(jnp.max(jnp.abs(applied - folded)) / jnp.max(jnp.abs(applied))))
    return out
