"""Pallas kernels of LQZO against independent NumPy references (interpret mode on CPU,
compiled where a GPU is present)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpapers_kernels.counter_hash import (
    bag_from_bits,
    counter_hash,
    gaussian_from_bits,
    popcount32,
)
from jaxpapers_kernels.counter_noise import counter_noise, counter_noise_reference
from jaxpapers_kernels.quant_matmul import (
    BlockSizes,
    LowRankSpec,
    pack_codes,
    perturbed_quant_matmul,
    perturbed_quant_matmul_reference,
    unpack_codes,
)

HAS_GPU = jax.default_backend() == "gpu"
MODES = [
    pytest.param(True, id="interpret"),
    pytest.param(
        False,
        id="compiled",
        marks=pytest.mark.skipif(not HAS_GPU, reason="compiled Pallas needs a GPU"),
    ),
]
TOL = {jnp.float32: 2e-5, jnp.bfloat16: 2e-2}


# ---- independent NumPy references ---------------------------------------------------------


def np_lowbias32(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.uint64) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def np_hash(seed: int, index: np.ndarray) -> np.ndarray:
    base = np_lowbias32(np.asarray([seed]))[0]
    return np_lowbias32((np.asarray(index, np.uint64) * 0x9E3779B1 + base) & 0xFFFFFFFF)


def np_bag(bits: np.ndarray, k: int) -> np.ndarray:
    masked = np.asarray(bits, np.uint64) & ((1 << k) - 1)
    ones = np.array([bin(int(b)).count("1") for b in masked.reshape(-1)]).reshape(masked.shape)
    return (2.0 * ones - k) / np.sqrt(k)


def np_dequant(codes_unpacked, scales, zeros, g):
    k_in = codes_unpacked.shape[0]
    rows = np.arange(k_in) // g
    return scales[rows] * (codes_unpacked - zeros[rows])


def np_lowrank_z(seeds, g_rows, n, spec: LowRankSpec) -> np.ndarray:
    mi, ni = spec.iso_shape
    u = np_bag(np_hash(int(seeds[0]), np.arange(mi * spec.rank)), spec.k).reshape(mi, spec.rank)
    v = np_bag(np_hash(int(seeds[1]), np.arange(ni * spec.rank)), spec.k).reshape(ni, spec.rank)
    return (u @ v.T / np.sqrt(spec.rank)).reshape(g_rows, n)


def make_quant(rng, k_in, n, bits, g):
    codes = rng.integers(0, 2**bits, (k_in, n))
    scales = rng.uniform(0.05, 0.2, (k_in // g, n))
    zeros = rng.uniform(0, 2**bits - 1, (k_in // g, n))
    return codes, scales, zeros


# ---- hash and perturbation --------------------------------------------------------------


def test_counter_hash_matches_numpy():
    idx = np.array([0, 1, 2, 12345, 2**31 + 7, 2**32 - 1], np.uint64)
    for seed in (0, 1, 987654321):
        got = np.asarray(counter_hash(jnp.uint32(seed), jnp.asarray(idx, jnp.uint32)))
        np.testing.assert_array_equal(got.astype(np.uint64), np_hash(seed, idx))


def test_popcount_and_bag_match_numpy(rng):
    words = rng.integers(0, 2**32, 500, dtype=np.uint64)
    got = np.asarray(popcount32(jnp.asarray(words, jnp.uint32)))
    np.testing.assert_array_equal(got, [bin(int(w)).count("1") for w in words])
    for k in (1, 4, 32):
        np.testing.assert_allclose(
            np.asarray(bag_from_bits(jnp.asarray(words, jnp.uint32), k)),
            np_bag(words, k),
            rtol=1e-6,
        )


def np_gaussian(bits: np.ndarray) -> np.ndarray:
    """float64 ``sqrt(2) erfinv((2 (bits >> 8) + 1) / 2^24 - 1)``."""
    from scipy.special import erfinv

    top = (np.asarray(bits, np.uint64) >> 8).astype(np.float64)
    return np.sqrt(2.0) * erfinv((2.0 * top + 1.0) / 2.0**24 - 1.0)


def test_gaussian_from_bits_matches_numpy_and_is_standard_normal():
    words = np_hash(3, np.arange(200_000))
    got = np.asarray(gaussian_from_bits(jnp.asarray(words, jnp.uint32)), np.float64)
    want = np_gaussian(words)
    # u is exact in float32; XLA's float32 erfinv polynomial is good to ~1e-6 near 0 and a few
    # 1e-6 relative in the tails (|z| ~ 4, where erfinv is steep)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # extreme words map to the symmetric ends, never to +-inf
    ends = np.asarray(gaussian_from_bits(jnp.asarray([0, 2**32 - 1], jnp.uint32)))
    np.testing.assert_allclose(ends, [-5.42, 5.42], atol=0.01)
    # moments of N(0, 1) within ~5 standard errors at n = 2e5
    n = len(got)
    assert abs(got.mean()) < 5 / np.sqrt(n)
    assert abs(got.var() - 1.0) < 5 * np.sqrt(2 / n)
    assert abs(np.mean(got**4) - 3.0) < 5 * np.sqrt(96 / n)
    assert abs(np.mean(np.abs(got) < 1.0) - 0.682689) < 0.005


@pytest.mark.parametrize("k", [1, 4, 16])
def test_bag_moments(k):
    z = np.asarray(counter_noise_reference(jnp.uint32(3), (400, 250), k=k), np.float64)
    assert abs(z.mean()) < 0.01
    assert abs(z.var() - 1.0) < 0.02
    assert np.abs(z).max() <= np.sqrt(k) + 1e-6
    # fourth moment of a mean of k Rademachers: 3 - 2 / k (Gaussian: 3)
    assert abs((z**4).mean() - (3 - 2 / k)) < 0.08


@pytest.mark.parametrize("interpret", MODES)
@pytest.mark.parametrize("shape", [(32, 128), (37, 45), (1, 300), (65, 129)])
@pytest.mark.parametrize("k", [1, 4])
def test_counter_noise_kernel_matches_reference(shape, k, interpret):
    got = counter_noise(jnp.uint32(11), shape, k=k, block_m=16, block_n=64, interpret=interpret)
    want = np_bag(np_hash(11, np.arange(shape[0] * shape[1])), k).reshape(shape)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    np.testing.assert_array_equal(
        np.asarray(got), np.asarray(counter_noise_reference(jnp.uint32(11), shape, k=k))
    )


def test_counter_noise_bad_input():
    with pytest.raises(ValueError, match="k="):
        counter_noise(jnp.uint32(0), (4, 4), k=0)
    with pytest.raises(ValueError, match="shape="):
        counter_noise(jnp.uint32(0), (4, 0))
    with pytest.raises(ValueError, match="seed"):
        counter_noise(jnp.zeros((2,), jnp.uint32), (4, 4))


# ---- packing ------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_pack_roundtrip_and_layout(bits, rng):
    codes = rng.integers(0, 2**bits, (16, 5))
    packed = np.asarray(pack_codes(jnp.asarray(codes), bits))
    per = 8 // bits
    assert packed.shape == (16 // per, 5) and packed.dtype == np.int8
    # byte i holds codes i*per + t at bit offset bits*t
    want = sum(codes[t::per].astype(np.int64) << (bits * t) for t in range(per))
    np.testing.assert_array_equal(packed.view(np.uint8), want)
    np.testing.assert_array_equal(np.asarray(unpack_codes(jnp.asarray(packed), bits)), codes)
    host = unpack_codes(packed, bits)  # NumPy in, NumPy out (host path, no compile)
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(host, codes)


# ---- fused perturbed quantized matmul -----------------------------------------------------

CASES = [
    # (M, K, N, bits, group, rank, iso_shape, dtype): ragged M and N, every bit width
    (8, 64, 128, 4, 32, 0, (1, 1), jnp.float32),
    (37, 96, 150, 4, 32, 2, (15, 30), jnp.float32),
    (37, 96, 150, 4, 32, 2, (15, 30), jnp.bfloat16),
    (5, 128, 70, 2, 64, 3, (14, 10), jnp.float32),
    (64, 64, 256, 8, 16, 4, (32, 32), jnp.bfloat16),
    (1, 32, 33, 2, 16, 1, (2, 33), jnp.float32),
]


@pytest.mark.parametrize("interpret", MODES)
@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}-int{c[3]}-r{c[5]}-{jnp.dtype(c[7]).name}"
)
def test_quant_matmul_matches_numpy(case, interpret, rng):
    m, k_in, n, bits, g, rank, iso, dtype = case
    spec = LowRankSpec(rank, 4, iso)
    codes, scales, zeros = make_quant(rng, k_in, n, bits, g)
    x = rng.normal(size=(m, k_in))
    seeds = np.array([123, 456], np.uint32)
    eps = 0.05
    s = scales + (eps * np_lowrank_z(seeds, k_in // g, n, spec) if rank else 0.0)
    want = x.astype(np.float64) @ np_dequant(codes, s, zeros, g)
    args = (
        jnp.asarray(x, dtype),
        pack_codes(jnp.asarray(codes), bits),
        jnp.asarray(scales, jnp.float32),
        jnp.asarray(zeros, jnp.float32),
        jnp.asarray(seeds),
        eps,
    )
    kw = dict(bits=bits, group_size=g, spec=spec)
    blocks = BlockSizes(16, 64, 32)  # several K steps where the groups allow it
    got = perturbed_quant_matmul(*args, **kw, block_sizes=blocks, interpret=interpret)
    ref = perturbed_quant_matmul_reference(*args, **kw)
    scale = np.abs(want).max()
    assert got.shape == (m, n) and got.dtype == dtype
    np.testing.assert_allclose(np.asarray(got, np.float64) / scale, want / scale, atol=TOL[dtype])
    np.testing.assert_allclose(np.asarray(ref, np.float64) / scale, want / scale, atol=TOL[dtype])


@pytest.mark.parametrize("interpret", MODES)
def test_quant_matmul_twin_passes_differ_by_linear_term(interpret, rng):
    codes, scales, zeros = make_quant(rng, 64, 96, 4, 16)
    x = jnp.asarray(rng.normal(size=(9, 64)), jnp.float32)
    args = (
        x,
        pack_codes(jnp.asarray(codes), 4),
        jnp.asarray(scales, jnp.float32),
        jnp.asarray(zeros, jnp.float32),
        jnp.asarray([5, 6], jnp.uint32),
    )
    kw = dict(bits=4, group_size=16, spec=LowRankSpec(2, 4, (16, 24)), interpret=interpret)
    y0 = perturbed_quant_matmul(*args, 0.0, **kw)
    yp = perturbed_quant_matmul(*args, 0.1, **kw)
    ym = perturbed_quant_matmul(*args, -0.1, **kw)
    np.testing.assert_allclose(np.asarray(yp + ym) / 2, np.asarray(y0), atol=1e-4)
    assert float(jnp.abs(yp - ym).max()) > 1e-2


@pytest.mark.parametrize("interpret", MODES)
def test_quant_matmul_grad_matches_reference(interpret, rng):
    codes, scales, zeros = make_quant(rng, 64, 40, 4, 16)
    packed = pack_codes(jnp.asarray(codes), 4)
    zeros = jnp.asarray(zeros, jnp.float32)
    seeds = jnp.asarray([1, 2], jnp.uint32)
    spec = LowRankSpec(2, 4, (10, 16))
    x = jnp.asarray(rng.normal(size=(6, 64)), jnp.float32)
    s = jnp.asarray(scales, jnp.float32)
    w = jnp.asarray(rng.normal(size=(6, 40)), jnp.float32)

    def f(fn, **extra):
        return lambda x, s: jnp.sum(
            w
            * jnp.tanh(
                fn(x, packed, s, zeros, seeds, 0.03, bits=4, group_size=16, spec=spec, **extra)
            )
        )

    got = jax.grad(f(perturbed_quant_matmul, interpret=interpret), argnums=(0, 1))(x, s)
    want = jax.grad(f(perturbed_quant_matmul_reference), argnums=(0, 1))(x, s)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
        assert float(jnp.abs(b).max()) > 0


def test_quant_matmul_bad_input(rng):
    codes, scales, zeros = make_quant(rng, 64, 32, 4, 16)
    packed = pack_codes(jnp.asarray(codes), 4)
    s, z = jnp.asarray(scales, jnp.float32), jnp.asarray(zeros, jnp.float32)
    x = jnp.ones((3, 64))
    with pytest.raises(ValueError, match="bits=3"):
        perturbed_quant_matmul(x, packed, s, z, bits=3, group_size=16)
    with pytest.raises(ValueError, match="group_size=24"):
        perturbed_quant_matmul(x, packed, s, z, bits=4, group_size=24)
    with pytest.raises(ValueError, match="codes has shape"):
        perturbed_quant_matmul(x, packed[:-1], s, z, bits=4, group_size=16)
    with pytest.raises(ValueError, match="scales has shape"):
        perturbed_quant_matmul(x, packed, s[:-1], z, bits=4, group_size=16)
    with pytest.raises(ValueError, match="zeros has shape"):
        perturbed_quant_matmul(x, packed, s, z[:, :-1], bits=4, group_size=16)
    with pytest.raises(ValueError, match="rank=5"):
        perturbed_quant_matmul(
            x, packed, s, z, bits=4, group_size=16, spec=LowRankSpec(5, 1, (4, 32))
        )
    with pytest.raises(ValueError, match="mult has shape"):
        perturbed_quant_matmul(x, packed, s, z, None, 0.1, s[:, :-1], bits=4, group_size=16)
    with pytest.raises(ValueError, match="iso_shape"):
        perturbed_quant_matmul(
            x, packed, s, z, bits=4, group_size=16, spec=LowRankSpec(1, 1, (3, 32))
        )


@pytest.mark.parametrize("interpret", MODES)
def test_quant_matmul_mult_and_k_steps(interpret, rng):
    # scales + eps * mult * Z with K = 128 split into 4 accumulated steps of 32 rows
    codes, scales, zeros = make_quant(rng, 128, 40, 4, 16)
    mult = rng.uniform(0.5, 2.0, scales.shape)
    spec = LowRankSpec(3, 4, (16, 20))
    seeds = np.array([9, 10], np.uint32)
    x = rng.normal(size=(5, 128))
    s = scales + 0.07 * mult * np_lowrank_z(seeds, 8, 40, spec)
    want = x @ np_dequant(codes, s, zeros, 16)
    args = [jnp.asarray(x, jnp.float32), pack_codes(jnp.asarray(codes), 4)]
    args += [jnp.asarray(a, jnp.float32) for a in (scales, zeros)]
    args += [jnp.asarray(seeds), 0.07, jnp.asarray(mult, jnp.float32)]
    kw = dict(bits=4, group_size=16, spec=spec)
    for blocks in (BlockSizes(8, 32, 32), BlockSizes(8, 128, None)):
        got = perturbed_quant_matmul(*args, **kw, block_sizes=blocks, interpret=interpret)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    ref = perturbed_quant_matmul_reference(*args[:6], **kw, mult=args[6])
    np.testing.assert_allclose(np.asarray(ref), want, rtol=1e-4, atol=1e-4)


def test_top_level_exports_and_quantize(rng):
    import jaxpapers_kernels as jk

    w = jnp.asarray(rng.normal(size=(64, 24)), jnp.float32)
    q = jk.quantize(w, bits=4, group_size=16)
    back = np_dequant(
        np.asarray(jk.unpack_codes(q.codes, 4)), np.asarray(q.scales), np.asarray(q.zeros), 16
    )
    # round-to-nearest on the grid: error at most half a step
    assert np.all(np.abs(back - np.asarray(w)) <= np.repeat(np.asarray(q.scales), 16, 0) / 2 + 1e-6)
    y = jk.perturbed_quant_matmul(jnp.ones((2, 64)), *q, bits=4, group_size=16)
    np.testing.assert_allclose(np.asarray(y), np.ones((2, 64)) @ back, rtol=1e-5, atol=1e-4)
    assert int(jk.counter_hash(jnp.uint32(1), jnp.uint32(2))) == int(np_hash(1, np.array([2]))[0])
    with pytest.raises(ValueError, match="block_k=0"):
        jk.BlockSizes(block_k=0)
    with pytest.raises(ValueError, match="group_size=12"):
        jk.quantize(w, bits=4, group_size=12)


def test_kernels_package_imports_only_jax():
    import subprocess
    import sys

    code = (
        "import sys, jaxpapers_kernels; "
        "bad = [m for m in ('flax', 'ott', 'diffrax', 'jaxpapers') if m in sys.modules]; "
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
