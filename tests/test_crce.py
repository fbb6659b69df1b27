"""P09 CRCE: CAM / Grad-CAM / ContrastiveCAM identities, faithfulness metrics, CR-CE loss."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import tolerance

from jaxpapers.crce import (
    CRCE,
    cell_fractions,
    class_activation_map,
    context_share,
    contrastive_cam,
    cr_ce_loss,
    deletion_insertion,
    estimated_context,
    grad_cam,
    mask_agreement,
    pointing_game,
)


def _linear_head(w, b):
    return lambda a: jnp.mean(a, axis=(1, 2)) @ w + b[None]


def _gap_setup(c=4, k=5, key=0):
    k1, k2, k3 = jax.random.split(jax.random.key(key), 3)
    a = jax.nn.relu(jax.random.normal(k1, (3, 4, 4, k)))
    w = jax.random.normal(k2, (k, c))
    b = jax.random.normal(k3, (c,))
    return a, w, b


def test_cam_equals_gradcam_up_to_normalisation_and_decomposes_logits():
    a, w, b = _gap_setup()
    t = jnp.array([0, 3, 1])
    head = _linear_head(w, b)
    cam, gc, gc_signed = jax.jit(
        lambda a: (
            class_activation_map(a, w, t),
            grad_cam(head, a, t),
            grad_cam(head, a, t, relu=False),
        )
    )(a)
    np.testing.assert_allclose(gc_signed * 16, cam, **tolerance(np.float32, 10.0))

    def norm(m):
        pos = np.maximum(np.asarray(m, np.float64), 0)
        return pos / np.maximum(pos.max(axis=(1, 2), keepdims=True), 1e-30)

    np.testing.assert_allclose(norm(np.asarray(gc)), norm(np.asarray(cam)), atol=1e-5)
    logits = np.asarray(head(a))[np.arange(3), np.asarray(t)]
    np.testing.assert_allclose(cam.mean(axis=(1, 2)) + b[t], logits, **tolerance(np.float32, 10))


def test_contrastive_cam_closed_form_float64_and_antisymmetry():
    a, w, b = _gap_setup(c=4)
    t = jnp.array([2, 0, 1])
    got = jax.jit(lambda a: contrastive_cam(_linear_head(w, b), a, t))(a)
    a64, w64, b64 = (np.asarray(v, np.float64) for v in (a, w, b))
    y = a64.mean(axis=(1, 2)) @ w64 + b64
    for i, c in enumerate(np.asarray(t)):
        others = [j for j in range(4) if j != c]
        q = np.exp(y[i, others] - y[i, others].max())
        q /= q.sum()
        wc = w64[:, c] - w64[:, others] @ q
        want = np.einsum("hwk,k->hw", a64[i], wc) / 16
        np.testing.assert_allclose(got[i], want, **tolerance(np.float32, 10.0))
        # sums to the logit margin minus the bias margin
        margin = y[i, c] - y[i, others] @ q - (b64[c] - b64[others] @ q)
        np.testing.assert_allclose(float(got[i].sum()), margin, rtol=1e-4, atol=1e-5)
    # two classes: antisymmetric
    a2, w2, b2 = _gap_setup(c=2, key=1)
    h2 = _linear_head(w2, b2)
    m0 = contrastive_cam(h2, a2, jnp.zeros(3, jnp.int32))
    m1 = contrastive_cam(h2, a2, jnp.ones(3, jnp.int32))
    np.testing.assert_allclose(m0, -m1, **tolerance(np.float32))
    # removing the class-mean weight (shared evidence) leaves ContrastiveCAM unchanged, not CAM
    shared = w2 + jax.random.normal(jax.random.key(9), (w2.shape[0], 1))
    m0s = contrastive_cam(_linear_head(shared, b2), a2, jnp.zeros(3, jnp.int32))
    np.testing.assert_allclose(m0s, m0, **tolerance(np.float32, 10.0))


def test_deletion_insertion_against_numpy_loop():
    key = jax.random.key(0)
    x = jax.random.normal(key, (2, 8, 8, 1))
    sal = jax.random.normal(jax.random.key(1), (2, 4, 4))
    t = jnp.array([1, 0])
    wts = jax.random.normal(jax.random.key(2), (64, 3))

    def model(z):
        return z.reshape(z.shape[0], -1) @ wts

    out = jax.jit(lambda x, s: deletion_insertion(model, x, s, t, steps=4))(x, sal)
    xn, sn, wn = np.asarray(x, np.float64), np.asarray(sal), np.asarray(wts, np.float64)
    for i in range(2):
        order = np.argsort(-sn[i].ravel(), kind="stable")
        base = np.full_like(xn[i], xn[i].mean())
        dele, ins = [], []
        for s in range(5):
            removed = np.zeros(16, bool)
            removed[order[: round(16 * s / 4)]] = True
            pix = np.kron(removed.reshape(4, 4), np.ones((2, 2)))[..., None] > 0
            for arr, img in ((dele, np.where(pix, base, xn[i])), (ins, np.where(pix, xn[i], base))):
                z = img.reshape(-1) @ wn
                p = np.exp(z - z.max())
                arr.append(p[int(t[i])] / p.sum())
        np.testing.assert_allclose(out.deletion[i], dele, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(out.insertion[i], ins, rtol=1e-4, atol=1e-6)
        auc = (np.sum(dele) - (dele[0] + dele[-1]) / 2) / 4
        np.testing.assert_allclose(float(out.deletion_auc[i]), auc, rtol=1e-4)


def test_pointing_mask_agreement_and_context():
    mask = jnp.zeros((2, 8, 8), bool).at[:, :4, :4].set(True)
    sal = jnp.zeros((2, 4, 4)).at[0, 0, 0].set(2.0).at[0, 3, 3].set(1.0).at[1, 3, 3].set(1.0)
    np.testing.assert_array_equal(pointing_game(sal, mask), [1.0, 0.0])
    np.testing.assert_allclose(mask_agreement(sal, mask), [2 / 3, 0.0], atol=1e-6)
    frac = cell_fractions(mask, (4, 4))
    np.testing.assert_allclose(context_share(sal, 1 - frac), [1 / 3, 1.0], atol=1e-6)
    est = estimated_context(sal)
    assert float(est[0, 0, 0]) == 0.0 and float(est[0, 1, 1]) == 1.0


def test_cr_ce_gradient_flows_and_beta_zero_is_cross_entropy():
    a, w, b = _gap_setup(c=2)
    y = jnp.array([0, 1, 1])
    ctx = jnp.zeros((3, 4, 4)).at[:, :2].set(1.0)

    def loss(w, beta, attribution):
        cfg = CRCE(beta=beta, attribution=attribution)
        return cr_ce_loss(_linear_head(w, b), a, y, ctx, config=cfg).loss

    g = jax.jit(jax.grad(loss), static_argnums=2)
    g0 = g(w, 0.0, "contrastive")
    ce = lambda w: jnp.mean(-jax.nn.log_softmax(_linear_head(w, b)(a))[jnp.arange(3), y])
    np.testing.assert_allclose(g0, jax.grad(ce)(w), **tolerance(np.float32))
    for attribution in ("contrastive", "gradcam"):
        g1 = g(w, 1.0, attribution)
        assert np.all(np.isfinite(g1)) and not np.allclose(g1, g0)
    est = cr_ce_loss(_linear_head(w, b), a, y, config=CRCE(context="estimated"))
    m = np.asarray(est.maps, np.float64)
    r = np.abs(m) < np.abs(m).mean(axis=(1, 2), keepdims=True)
    want = np.mean(np.sum(m * r, axis=(1, 2)) ** 2)
    np.testing.assert_allclose(float(est.penalty), want, rtol=1e-5, atol=1e-7)
    share = cr_ce_loss(_linear_head(w, b), a, y, ctx, config=CRCE(penalty="share")).penalty
    assert 0.0 <= float(share) <= 1.0


def test_bad_inputs():
    a, w, b = _gap_setup(c=3)
    head = _linear_head(w, b)
    with pytest.raises(ValueError, match="target"):
        contrastive_cam(head, a, jnp.array([0, 3, 1]))
    with pytest.raises(ValueError, match="target"):
        grad_cam(head, a, jnp.array([0, 1]))
    with pytest.raises(ValueError, match="labels"):
        cr_ce_loss(head, a, jnp.array([0, -1, 1]), jnp.zeros((3, 4, 4)), config=CRCE())
    with pytest.raises(ValueError, match="context has shape"):
        cr_ce_loss(head, a, jnp.array([0, 1, 1]), jnp.zeros((3, 8, 8)), config=CRCE())
    with pytest.raises(ValueError, match="beta"):
        CRCE(beta=-1.0)
    with pytest.raises(ValueError, match="attribution"):
        CRCE(attribution="lime")
    with pytest.raises(ValueError, match="penalty"):
        CRCE(penalty="ratio")
    with pytest.raises(ValueError, match="object_mask"):
        pointing_game(jnp.zeros((2, 4, 4)), jnp.zeros((3, 8, 8), bool))
    with pytest.raises(ValueError, match="grid"):
        mask_agreement(jnp.zeros((2, 3, 3)), jnp.zeros((2, 8, 8), bool))
    with pytest.raises(ValueError, match="weights"):
        class_activation_map(a, jnp.zeros((4, 3)), jnp.array([0, 1, 2]))


def _leaky_two_class(leak):
    """Two images (labels 0, 1) on a 4 x 4 grid: the true shape's detector channel is 1 on the
    four object cells and ``leak`` on the twelve context cells (receptive fields overlapping the
    object), the other channel 0; context = the twelve non-object cells."""
    ctx = jnp.ones((2, 4, 4)).at[:, :2, :2].set(0.0)
    a = np.zeros((2, 4, 4, 2), np.float32)
    for i in range(2):
        a[i, ..., i] = np.where(np.asarray(ctx[i]) > 0, leak, 1.0)
    return jnp.asarray(a), jnp.array([0, 1]), ctx


def test_vanishing_map_is_never_a_minimum_of_cr_ce():
    """The defect of the share penalty ``sum |M| r / sum |M|`` (issue 13): it is scale-free, so
    only a vanishing map (0 / eps = 0) escapes it, and with beta * share > ln 2 the constant
    predictor has the lowest loss. The default penalty ``(sum_ij M_ij r_ij)^2`` is quadratic in
    the map: at the vanishing map its slope is 0 while cross-entropy's is -1/2 in the margin, so
    reading the object always lowers the loss, whatever beta."""
    a, y, ctx = _leaky_two_class(0.8)
    b = jnp.zeros(2)

    def loss(scale, beta, penalty):
        w = scale * jnp.array([[1.0, -1.0], [-1.0, 1.0]])
        cfg = CRCE(beta=beta, penalty=penalty)
        return cr_ce_loss(_linear_head(w, b), a, y, ctx, config=cfg).loss

    # compiled, vectorised over the scales (eager, every scale dispatches op by op)
    losses = jax.jit(jax.vmap(loss, in_axes=(0, None, None)), static_argnums=2)
    grad = jax.jit(jax.grad(loss), static_argnums=2)
    scales = np.concatenate([[0.0], np.geomspace(1e-3, 8.0, 40)])
    # closed form: margin 2 (4 + 12 leak) / 16 * scale, context evidence 2 (12 leak) / 16 * scale
    m, c = 2 * (4 + 9.6) / 16 * scales, 2 * 9.6 / 16 * scales
    for beta in (0.5, 2.0, 8.0):
        sq = np.asarray(losses(scales, beta, "squared"), np.float64)
        np.testing.assert_allclose(sq, np.log1p(np.exp(-m)) + beta * c**2, rtol=1e-5, atol=1e-6)
        assert sq[0] == pytest.approx(np.log(2.0), abs=1e-6)
        slope = float(grad(0.0, beta, "squared"))
        assert slope == pytest.approx(-0.5 * m[1] / scales[1], rel=1e-4)  # CE's, whatever beta
        assert sq[1:].min() < sq[0]
        # the absolute value |sum M r| has slope beta * c - m / 2 there: collapses for beta > 0.71
        ab = float(grad(1e-6, beta, "absolute"))
        assert ab == pytest.approx(beta * c[1] / scales[1] - 0.5 * m[1] / scales[1], rel=1e-3)
    old = np.asarray(losses(scales, 2.0, "share"), np.float64)
    assert old[0] == pytest.approx(np.log(2.0), abs=1e-6)  # share 0 / (0 + 1e-8): the escape
    assert old[1:].min() > old[0] + 0.5  # every object-reading scale costs beta * 0.71 more
    # default configuration = the squared evidence penalty
    assert CRCE().penalty == "squared"


def test_three_classes_contrastive_cam_deletes_class_evidence_before_shared_evidence():
    """Where the faithfulness bed needs three classes: one cell carries evidence that raises every
    logit alike (it does not change the prediction), another evidence for class 0 alone. CAM (and
    Grad-CAM, proportional to it) ranks the shared cell first, so deleting it leaves p_0 unchanged;
    ContrastiveCAM subtracts the softmax-weighted other classes, ranks the class cell first, and
    its deletion curve falls at once (lower deletion AUC)."""
    w = jnp.array([[5.0, 5.0, 5.0], [4.0, 0.0, 0.0]])  # channel 0 shared, channel 1 class 0
    x = jnp.zeros((1, 4, 4, 2)).at[0, :2, :2, 0].set(1.0).at[0, 2:, 2:, 1].set(1.0)

    def model(z):
        return jnp.mean(z, axis=(1, 2)) @ w

    feats = x.reshape(1, 2, 2, 2, 2, 2).mean(axis=(2, 4))  # 2x2 cells of 2x2 pixels
    head = lambda a: jnp.mean(a, axis=(1, 2)) @ w  # the same logits on the cells
    np.testing.assert_allclose(head(feats), model(x), rtol=1e-6)
    t = jnp.argmax(model(x), -1)
    assert int(t[0]) == 0
    ccam = contrastive_cam(head, feats, t)
    cam = class_activation_map(feats, w, t)
    assert float(ccam[0, 1, 1]) > float(ccam[0, 0, 0])  # class cell first
    assert float(cam[0, 0, 0]) > float(cam[0, 1, 1])  # shared cell first
    baseline = jnp.zeros_like(x)
    d_ccam = deletion_insertion(model, x, ccam, t, steps=4, baseline=baseline)
    d_cam = deletion_insertion(model, x, cam, t, steps=4, baseline=baseline)
    assert float(d_ccam.deletion_auc[0]) < float(d_cam.deletion_auc[0]) - 0.05
