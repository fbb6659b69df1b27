"""P16 experiments: registrations and the table of sizes (runs live in ``_tasks.py``)."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from jaxpapers.core.experiment import AllOf, Better, Experiment, Threshold, register
from jaxpapers.multiclass.experiments import _plots, _tasks

PAPER = "P16"


class Sizes(NamedTuple):
    T: int
    d: int = 20
    C: int = 5
    noise: float = 0.1
    margin: float = 0.05
    eta: float = 0.3
    exploration: float = 0.3
    losses: tuple[str, ...] = ("hinge", "smooth_hinge", "logistic")
    delays: tuple[int, ...] = (0, 10, 100)
    eta_grid: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
    train: int = 1347


SIZES = {
    # Smoke: three step sizes + the parameter-free Gaptron are four learners, the shape of the
    # other experiments' grids, so parameter_free reuses their compiled run (as delay 0 does).
    "smoke": Sizes(
        T=200, d=5, C=3, losses=("hinge",), delays=(0, 100), eta_grid=(0.1, 0.3, 1.0), train=300
    ),
    "quick": Sizes(T=3000),
    "full": Sizes(T=50_000, d=50, C=10),
}

FOUR = ("perceptron", "Gaptron", "stable perceptron", "stable Gaptron")

register(
    Experiment(
        paper=PAPER,
        id="novikoff",
        claim="sanity: on separable data the multiclass perceptron makes at most 2 (R/gamma)^2 "
        "mistakes (Novikoff)",
        metric="perceptron mistakes / 2 (R/gamma)^2",
        lower_is_better=True,
        baselines=(),
        methods=("perceptron mistakes / 2(R/gamma)^2",),
        rule=Threshold("perceptron mistakes / 2(R/gamma)^2", 1.0),
        run=partial(_tasks.novikoff, sizes=SIZES),
    )
)

register(
    Experiment(
        paper=PAPER,
        id="surrogate_regret",
        claim="the stability-exploiting perceptron and Gaptron have lower surrogate regret than "
        "the perceptron and Gaptron on the same noisy streams (hinge; smooth hinge and logistic "
        "rows reported too)",
        metric="sum_t E[mistake] - sum_t hinge_t(U*) (U* offline, ridge 1, optax L-BFGS)",
        lower_is_better=True,
        baselines=("perceptron", "Gaptron"),
        methods=("stable perceptron", "stable Gaptron"),
        rule=AllOf(
            (Better("stable perceptron", "perceptron"), Better("stable Gaptron", "Gaptron"))
        ),
        run=partial(_tasks.surrogate_regret, sizes=SIZES),
        plot=_plots.plot_mistake_curves,
    )
)

register(
    Experiment(
        paper=PAPER,
        id="delays",
        claim="with delayed feedback (d = 0, 10, 100) the stability-exploiting Gaptron keeps a "
        "lower surrogate regret than Gaptron at the largest delay",
        metric="surrogate regret (hinge) at each delay",
        lower_is_better=True,
        baselines=("Gaptron d=100", "perceptron d=100"),
        methods=("stable Gaptron d=100", "stable perceptron d=100"),
        rule=AllOf(
            (
                Better("stable Gaptron d=100", "Gaptron d=100"),
                Better("stable perceptron d=100", "perceptron d=100"),
            )
        ),
        run=partial(_tasks.delays, sizes=SIZES),
        plot=_plots.plot_delays,
    )
)

register(
    Experiment(
        paper=PAPER,
        id="parameter_free",
        claim="parameter-free Gaptron, with no step size, beats Gaptron at the median step of "
        "a grid and is no worse than the best step chosen in hindsight",
        metric="surrogate regret (hinge)",
        lower_is_better=True,
        baselines=("Gaptron (best eta of grid)", "Gaptron (median eta of grid)"),
        methods=("parameter-free Gaptron",),
        rule=AllOf(
            (
                Better("parameter-free Gaptron", "Gaptron (median eta of grid)"),
                Better("parameter-free Gaptron", "Gaptron (best eta of grid)", at_least=True),
            )
        ),
        run=partial(_tasks.parameter_free, sizes=SIZES),
    )
)

register(
    Experiment(
        paper=PAPER,
        id="batch",
        claim="online-to-batch (one pass, average iterate) on sklearn digits: the stable "
        "Gaptron's test error is no worse than the perceptron's (average or last iterate)",
        metric="test error of the average iterate (held-out quarter of the digits)",
        lower_is_better=True,
        baselines=("perceptron (average iterate)", "perceptron (last iterate)"),
        methods=("stable Gaptron (average iterate)",),
        rule=AllOf(
            (
                Better(
                    "stable Gaptron (average iterate)",
                    "perceptron (average iterate)",
                    at_least=True,
                ),
                Better(
                    "stable Gaptron (average iterate)", "perceptron (last iterate)", at_least=True
                ),
            )
        ),
        run=partial(_tasks.batch, sizes=SIZES),
    )
)
