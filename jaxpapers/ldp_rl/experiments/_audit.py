"""Privacy audit: exact likelihood ratios by enumeration, empirical ones from sampled releases."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.ldp_rl import (
    max_privacy_loss,
    randomized_response,
    randomized_response_output_probabilities,
    unary_encode,
    unary_output_probabilities,
)


def exact_losses(epsilons, num_categories: int) -> dict[str, list[float]]:
    """Exact max log-likelihood ratio / epsilon for unary encoding and randomised response."""
    return {
        "unary exact loss / eps": [
            max_privacy_loss(unary_output_probabilities(num_categories, e)) / e for e in epsilons
        ],
        "randomised response exact loss / eps": [
            max_privacy_loss(randomized_response_output_probabilities(e)) / e for e in epsilons
        ],
    }


def empirical_excess(
    epsilon: float, num_categories: int, samples: int, seed: int, min_count: int = 500
) -> tuple[float, float]:
    """Share of (output, input pair) cells whose empirical log ratio exceeds eps by more than 3
    standard errors, and the largest empirical log ratio / eps, from ``samples`` unary releases
    per input (outputs seen fewer than ``min_count`` times under either input are skipped:
    their ratio is not resolved)."""
    d = num_categories
    keys = jax.random.split(jax.random.key(seed), d)
    bits = jax.vmap(lambda x, k: unary_encode(jnp.full((samples,), x), d, epsilon, key=k))(
        jnp.arange(d), keys
    )
    codes = np.asarray(bits @ (2.0 ** jnp.arange(d))).astype(np.int64)  # [d, samples]
    counts = np.stack([np.bincount(c, minlength=2**d) for c in codes]).astype(np.float64)
    cells, violations, worst_ratio = 0, 0, 0.0
    for i in range(d):
        for j in range(d):
            ok = (counts[i] >= min_count) & (counts[j] >= min_count)
            if i == j or not ok.any():
                continue
            log_ratio = np.log(counts[i, ok] / counts[j, ok])
            se = np.sqrt(1 / counts[i, ok] + 1 / counts[j, ok])
            cells += int(ok.sum())
            violations += int(np.sum((log_ratio - epsilon) / se > 3.0))
            worst_ratio = max(worst_ratio, float(log_ratio.max() / epsilon))
    return violations / max(cells, 1), worst_ratio


def randomized_response_empirical(epsilon: float, samples: int, seed: int) -> float:
    """Empirical log likelihood ratio / epsilon of randomised response from sampled releases."""
    k0, k1 = jax.random.split(jax.random.key(seed))
    y0 = np.asarray(randomized_response(jnp.zeros(samples, jnp.int32), epsilon, key=k0))
    y1 = np.asarray(randomized_response(jnp.ones(samples, jnp.int32), epsilon, key=k1))
    p0, p1 = y0.mean(), y1.mean()
    return float(abs(np.log(p1 / p0)) / epsilon) if 0 < p0 < 1 and 0 < p1 < 1 else 0.0
