"""The continual protocol: pretrain on task 1, then learn tasks 2 and 3 with every method.

Two compiled training loops serve every run: ``finetune`` (all weights trainable, images in;
pretraining and sequential fine-tuning, vmapped over seeds) and ``adapt`` (frozen base, features
precomputed once per seed; the adapter methods x seeds in one vmap, each method a row of 0/1
flags that choose which parameters train). One compiled ``evaluate`` scores every run on every
task's test videos after every stage.
"""

from __future__ import annotations

import functools
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers.core.pytrees import FAST_COMPILE, stack_trees
from jaxpapers.steam import (
    Adapters,
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
    iou_counts,
    matching_loss,
    mean_iou,
    orthogonal_projector,
    scale_shift,
    segment,
)
from jaxpapers.steam.experiments._tasks import TASKS, class_mask, label_ids, task_videos


class Method(NamedTuple):
    """0/1 flags: which adapter parts train, retrieval style, SCOA."""

    dash: float = 0.0
    frame: float = 0.0
    video: float = 0.0
    prompt: float = 0.0
    keys: float = 0.0
    hard: float = 0.0
    scoa: float = 0.0


FINETUNE = "sequential fine-tuning"
L2P = "L2P prompt retrieval"
STEAM = "STEAM"
NO_DASH = "STEAM w/o DASH"
NO_TEMPORAL = "STEAM w/o temporal experts"
NO_SCOA = "STEAM w/o SCOA"
ADAPTER_METHODS: dict[str, Method] = {
    L2P: Method(prompt=1.0, keys=1.0, hard=1.0),
    STEAM: Method(dash=1.0, frame=1.0, video=1.0, scoa=1.0),
    NO_DASH: Method(frame=1.0, video=1.0, scoa=1.0),
    NO_TEMPORAL: Method(dash=1.0, frame=1.0, scoa=1.0),
    NO_SCOA: Method(dash=1.0, frame=1.0, video=1.0),
}
METHODS: tuple[str, ...] = (FINETUNE, *ADAPTER_METHODS)


def _video_loss(cfg, params, adapters, proj, feats, inst, cls, allowed, active, hard, gates=None):
    assign = jnp.asarray(assignments(cfg.queries, cfg.max_objects))
    out = decode(cfg, params, adapters, proj, feats, active=active, hard=hard, task_classes=gates)
    per_frame = jax.vmap(matching_loss, in_axes=(0, 0, 0, 0, None, None))(
        out.class_logits, out.mask_logits, inst, cls, allowed, assign
    )
    return jnp.mean(per_frame), out


def make_finetune(cfg: VISConfig, graphdef, *, steps: int, batch: int):
    """``finetune(params, images, inst, cls, allowed, lr, key) -> (params, losses)`` (one run)."""
    adapters = init_adapters(cfg, key=jax.random.key(0))
    proj = identity_projectors(cfg)
    active = jax.nn.one_hot(0, cfg.experts)

    def loss_fn(p, images, inst, cls, allowed):
        b, t = images.shape[:2]
        feats = encode(graphdef, p, images.reshape(b * t, *images.shape[2:]))
        feats = feats.reshape(b, t, *feats.shape[1:])
        losses, _ = jax.vmap(
            lambda f, i, c: _video_loss(cfg, p, adapters, proj, f, i, c, allowed, active, 0.0)
        )(feats, inst, cls)
        return jnp.mean(losses)

    def run(params, images, inst, cls, allowed, lr, key):
        opt = optax.adam(lr)

        def step(carry, k):
            p, s = carry
            idx = jax.random.randint(k, (batch,), 0, images.shape[0])
            loss, g = jax.value_and_grad(loss_fn)(p, images[idx], inst[idx], cls[idx], allowed)
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), loss

        (params, _), losses = jax.lax.scan(
            step, (params, opt.init(params)), jax.random.split(key, steps)
        )
        return params, losses

    return run


def _summary(feats: jax.Array) -> jax.Array:
    """Mean pooled feature of a batch of videos ``[N, T, g, g, D]``."""
    return feats.mean(axis=(0, 1, 2, 3))


def make_adapt(
    cfg: VISConfig, *, steps: int, batch: int, lr: float, energy: float, task_classes: jax.Array
):
    """``adapt(...)`` for one run of an adapter method on task ``t`` (see the module docstring).

    Before training: DASH of task ``t`` is initialised from the task's feature moments against
    task 1's (when the method uses DASH); the routing keys of task 1 and ``t`` are set to their
    tasks' mean features; with SCOA, expert ``t``'s projectors remove the subspace of the
    frame / video expert inputs of tasks ``< t`` (computed on ``earlier`` videos under the current
    model). Then Adam trains the parameters the method's flags and the task allow.
    """
    opt = optax.adam(lr)

    def run(
        params,
        adapters: Adapters,
        proj: Projectors,
        feats,
        inst,
        cls,
        earlier,
        t,
        method,
        allowed,
        new_classes,
        key,
    ):
        e = cfg.experts
        onehot = jax.nn.one_hot(t, e)
        before = (jnp.arange(e) < t).astype(jnp.float32)
        active = (jnp.arange(e) <= t).astype(jnp.float32)
        keys = adapters.keys.at[0].set(_summary(earlier[0])).at[t].set(_summary(feats))
        mean0, std0 = feature_moments(earlier[0])
        init = dash_init(feats, mean0, std0)
        use = method.dash * onehot[:, None]
        dash = adapters.dash._replace(
            gamma=use * init.gamma[None] + (1 - use) * adapters.dash.gamma,
            beta=use * init.beta[None] + (1 - use) * adapters.dash.beta,
        )
        adapters = adapters._replace(keys=keys, dash=dash)

        # SCOA: the inputs expert t must not disturb are those of the earlier tasks' videos.
        rows = jax.vmap(
            jax.vmap(
                lambda f: adapter_inputs(
                    cfg, params, adapters, proj, f, active=before, hard=method.hard
                )
            )
        )(earlier)
        weight = before[:, None, None, None]
        pix = (rows[0] * weight).reshape(-1, cfg.dim)
        qry = (rows[1] * weight).reshape(-1, cfg.dim)
        pf = orthogonal_projector(input_subspace(pix, energy=energy, max_rank=cfg.dim - cfg.rank))
        pv = orthogonal_projector(input_subspace(qry, energy=energy, max_rank=cfg.dim - cfg.rank))
        eye = jnp.eye(cfg.dim)
        s = method.scoa * onehot[:, None, None]
        proj = Projectors(
            s * pf[None] + (1 - s) * jnp.where(onehot[:, None, None] > 0, eye[None], proj.frame),
            s * pv[None] + (1 - s) * jnp.where(onehot[:, None, None] > 0, eye[None], proj.video),
        )

        col = jnp.concatenate([new_classes, jnp.zeros((1,))])
        mask = {
            "adapters": Adapters(
                dash=jax.tree.map(lambda _: method.dash * onehot[:, None], adapters.dash),
                frame=jax.tree.map(lambda _: method.frame * onehot[:, None, None], adapters.frame),
                video=jax.tree.map(lambda _: method.video * onehot[:, None, None], adapters.video),
                keys=method.keys * onehot[:, None],
                prompts=method.prompt * onehot[:, None, None],
            ),
            "cls": {"kernel": jnp.broadcast_to(col, params["cls"]["kernel"].shape), "bias": col},
        }
        trainable = {"adapters": adapters, "cls": params["cls"]}

        def loss_fn(tr, f, i, c):
            p = {**params, "cls": tr["cls"]}

            def one(fv, iv, cv):
                loss, _out = _video_loss(
                    cfg,
                    p,
                    tr["adapters"],
                    proj,
                    fv,
                    iv,
                    cv,
                    allowed,
                    active,
                    method.hard,
                    task_classes,
                )
                s = fv.mean(axis=(0, 1, 2))
                k = tr["adapters"].keys[t]
                pull = 1 - s @ k / (jnp.linalg.norm(s) * jnp.linalg.norm(k) + 1e-6)
                return loss + method.keys * pull

            return jnp.mean(jax.vmap(one)(f, i, c))

        def step(carry, k):
            tr, st = carry
            idx = jax.random.randint(k, (batch,), 0, feats.shape[0])
            loss, g = jax.value_and_grad(loss_fn)(tr, feats[idx], inst[idx], cls[idx])
            g = jax.tree.map(lambda a, m: a * m, g, mask)
            u, st = opt.update(g, st, tr)
            return (optax.apply_updates(tr, u), st), loss

        (trainable, _), losses = jax.lax.scan(
            step, (trainable, opt.init(trainable)), jax.random.split(key, steps)
        )
        new = trainable["adapters"]

        def leak(x, p, experts):
            # Expert t's output on the earlier inputs' own principal subspace, relative to its
            # output on the inputs: exactly 0 under SCOA, O(1) without it.
            u = input_subspace(x, energy=energy, max_rank=cfg.dim - cfg.rank)
            w = p[t] @ experts.down[t] @ experts.up[t]
            return jnp.linalg.norm(x @ u @ u.T @ w) / (jnp.linalg.norm(x @ w) + 1e-30)

        leaks = jnp.stack([leak(pix, proj.frame, new.frame), leak(qry, proj.video, new.video)])
        return {**params, "cls": trainable["cls"]}, new, proj, losses, leaks

    return run


def make_evaluate(cfg: VISConfig, graphdef):
    """``evaluate(params, adapters, proj, feats, inst, cls, allowed, active, hard)`` -> per task
    mIoU, identity switches and pairs; ``feats`` ``[tasks, N, T, g, g, D]``."""
    labels = [label_ids(task) for task in TASKS]

    def run(params, adapters, proj, feats, inst, cls, allowed, active, hard, gates):
        def video(f, i, c):
            out = decode(
                cfg, params, adapters, proj, f, active=active, hard=hard, task_classes=gates
            )
            seg = segment(out, allowed)
            sw = identity_switches(seg.tracks, i, cfg.max_objects, cfg.queries)
            counts = iou_counts(seg.semantic, c, cfg.classes + 1)
            return counts, sw

        res = []
        for j in range(len(TASKS)):
            counts, sw = jax.vmap(video)(feats[j], inst[j], cls[j])
            total = jax.tree.map(lambda x: x.sum(0), counts)
            res.append((mean_iou(total, labels[j]), sw.switches.sum(), sw.pairs.sum()))
        return tuple(jnp.stack(v) for v in zip(*res, strict=True))

    return run


def background_only_miou(classes: jax.Array, num_labels: int) -> list[list[float]]:
    """``[task, seed]`` mIoU of the all-background prediction on each task's test class maps
    ``classes [seeds, tasks, N, T, H, W]``, scored like the methods (the task's labels).

    A majority-class reference shown in the extras: predicting background everywhere gives the
    background IoU (its pixel share) and 0 on every object class. (``learns_tasks`` judges the
    learning gain instead: a pretrained model can beat this reference without learning a task.)
    """
    out = []
    for j, task in enumerate(TASKS):
        row = []
        for s in range(classes.shape[0]):
            target = classes[s, j]
            counts = iou_counts(jnp.zeros_like(target), target, num_labels)
            row.append(float(mean_iou(counts, label_ids(task))))
        out.append(row)
    return out


def run_protocol(sizes: Any, seeds: list[int], *, fast: bool = False) -> dict[str, Any]:
    """Every method on the task sequence; JSON-ready per-method matrices over seeds.

    ``fast`` compiles the training and evaluation programs with ``FAST_COMPILE`` (smoke runs:
    at tiny shapes and a few steps the compiles are the whole cost).
    """
    cfg = VISConfig(
        size=sizes.size,
        width=sizes.width,
        dim=sizes.dim,
        queries=sizes.queries,
        classes=4,
        experts=len(TASKS),
        rank=sizes.rank,
        temperature=sizes.temperature,
    )
    n_seeds = len(seeds)
    names = list(ADAPTER_METHODS)
    n_runs = len(names) * n_seeds  # run r = method r // n_seeds, seed r % n_seeds

    clock = _Clock()
    n_train = sizes.train_videos

    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
    def make_data(key):
        ks = jax.random.split(key, len(TASKS))
        return [
            task_videos(task, n_train + sizes.test_videos, sizes.frames, cfg.size, key=k)
            for task, k in zip(TASKS, ks, strict=True)
        ]

    videos = stack_trees([make_data(jax.random.key(1000 + s)) for s in seeds])
    train = [jax.tree.map(lambda x: x[:, :n_train], v) for v in videos]
    test = [jax.tree.map(lambda x: x[:, n_train:], v) for v in videos]
    clock("data")

    graphdef = None
    base = []
    for s in seeds:
        graphdef, p = init_vis(cfg, key=jax.random.key(s))
        base.append(p)
    params = stack_trees(base)

    finetune = _jit(
        fast,
        jax.vmap(
            make_finetune(cfg, graphdef, steps=sizes.task_steps, batch=sizes.batch),
            in_axes=(0, 0, 0, 0, None, None, 0),
        ),
    )
    encode_all = _jit(
        fast, jax.vmap(lambda p, x: jax.vmap(jax.vmap(lambda v: encode(graphdef, p, v)))(x))
    )
    all_images = jnp.stack([v.image for v in videos], 1)  # [seeds, tasks, N, T, H, W, C]
    adapt = _jit(
        fast,
        jax.vmap(
            make_adapt(
                cfg,
                steps=sizes.task_steps,
                batch=sizes.batch,
                lr=sizes.adapter_lr,
                energy=sizes.energy,
                task_classes=jnp.stack([class_mask(task.pool) for task in TASKS]),
            ),
            in_axes=(0, 0, 0, 0, 0, 0, 0, None, 0, None, None, 0),
        ),
    )
    evaluate = _jit(
        fast, jax.vmap(make_evaluate(cfg, graphdef), in_axes=(0, 0, 0, 0, 0, 0, None, None, 0, 0))
    )

    def keys(offset, n):
        return jnp.stack([jax.random.key(7919 * s + offset) for s in seeds] * n)

    images = [v.image for v in train]
    init_params = params  # the model before pretraining: the "before" of task 1's learning gain
    pre_losses = []
    for chunk in range(max(1, sizes.pretrain_steps // sizes.task_steps)):
        params, chunk_losses = finetune(
            params,
            images[0],
            train[0].instances,
            train[0].classes,
            class_mask(TASKS[0].pool),
            sizes.lr,
            keys(11 + 100 * chunk, 1),
        )
        pre_losses.append(chunk_losses)
    clock("pretrain")
    test_inst = jnp.stack([v.instances for v in test], 1)  # [seeds, tasks, N, T, H, W]
    test_cls = jnp.stack([v.classes for v in test], 1)

    def rep(tree):  # seeds -> runs (method-major)
        return jax.tree.map(lambda x: jnp.concatenate([x] * len(names)), tree)

    feats = encode_all(params, all_images)  # [seeds, tasks, N, T, g, g, D]
    base_train_feats = [feats[:, j, :n_train] for j in range(len(TASKS))]
    base_test_feats = feats[:, :, n_train:]
    clock("encode")
    ft_params = params
    ad_params = rep(params)
    ad = jax.vmap(lambda k: init_adapters(cfg, key=k))(keys(13, len(names)))
    proj = jax.vmap(lambda _: identity_projectors(cfg))(jnp.arange(n_runs))
    flags = Method(
        *(
            jnp.repeat(jnp.asarray(v, jnp.float32), n_seeds)
            for v in zip(*ADAPTER_METHODS.values(), strict=True)
        )
    )
    earlier = jnp.stack([f[:, : sizes.subspace_videos] for f in base_train_feats], 1)
    zero_ad = jax.vmap(lambda k: init_adapters(cfg, key=k))(keys(0, 1))
    eye = jax.vmap(lambda _: identity_projectors(cfg))(jnp.arange(n_seeds))

    task_classes = jnp.stack([class_mask(task.pool) for task in TASKS])
    rep_gates = jnp.broadcast_to(task_classes, (n_runs, *task_classes.shape))
    acc = np.zeros((len(METHODS), len(TASKS), len(TASKS), n_seeds))
    sw = np.zeros_like(acc)
    pairs = np.zeros_like(acc)
    losses = {"pretrain": np.concatenate([np.asarray(x) for x in pre_losses], 1).mean(0).tolist()}
    leaks: dict[str, Any] = {}
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
            _cat(jnp.zeros(n_seeds), flags.hard),
            _cat(jnp.ones((n_seeds, *task_classes.shape)), rep_gates),
        )

    ft_test = encode_all(init_params, all_images)[:, :, n_train:]
    for t, task in enumerate(TASKS):
        new = set(task.pool) - seen
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
            ft_params, l_ft = finetune(
                ft_params,
                images[t],
                train[t].instances,
                train[t].classes,
                allowed,
                sizes.ft_lr,
                keys(17 + t, 1),
            )
            ad_params, ad, proj, l_ad, leak = adapt(
                ad_params,
                ad,
                proj,
                rep(base_train_feats[t]),
                rep(train[t].instances),
                rep(train[t].classes),
                rep(earlier),
                t,
                flags,
                allowed,
                class_mask(new),
                keys(23 + t, len(names)),
            )
            leaks[f"task{t + 1}"] = np.asarray(leak).reshape(len(names), n_seeds, 2).tolist()
            losses[f"task{t + 1}_finetune"] = np.asarray(l_ft).mean(0).tolist()
            losses[f"task{t + 1}_adapters"] = (
                np.asarray(l_ad).reshape(len(names), n_seeds, -1).mean(1).tolist()
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
    return {
        "methods": list(METHODS),
        "tasks": [task.name for task in TASKS],
        "miou": acc.tolist(),  # [method, stage, task, seed]
        "miou_before": before_acc.tolist(),  # [method, task, seed]: just before learning it
        "switches": sw.tolist(),
        "pairs": pairs.tolist(),
        "losses": losses,
        "leaks": leaks,  # per task: [adapter method, seed, (frame, video)]
        "background_only_miou": background_only_miou(test_cls, cfg.classes + 1),  # [task, seed]
        "fold_error": _fold_error(cfg, graphdef, params, ad, test[1].image, n_seeds),
        "cpu_seconds": clock.laps,
    }


def _jit(fast: bool, fn):
    return jax.jit(fn, compiler_options=FAST_COMPILE if fast else None)


def _cat(a, b):
    return jax.tree.map(lambda x, y: jnp.concatenate([x, y]), a, b)


class _Clock:
    """Process CPU seconds per phase (compiles included), for the budget notes in the extras."""

    def __init__(self) -> None:
        self.last = time.process_time()
        self.laps: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        now = time.process_time()
        self.laps[name] = round(now - self.last, 2)
        self.last = now


def _fold_error(cfg, graphdef, params, adapters, images, n_seeds) -> list[float]:
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
