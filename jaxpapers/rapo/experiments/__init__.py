"""P05 experiments, declared for ``jaxpapers reproduce P05`` (the work is in ``_run``).

Every experiment reads one cached pipeline run (``_pipeline.run_pipeline``): per seed a plain and
a Psy-CoT warm-up of a small decoder LM on imperfect demonstrations (30% generic flattery) of
stereotyped characters (temperament fixed by occupation, ``rapo.stereotyped_split``), then GRPO
and RAPO from the Psy-CoT warm-up under the hackable judge (it pays a generic phrase 1.5 times a
mention of the character, so its ranking of replies is the reverse of the exact judge's,
derivation in ``rapo._world``) and under the exact judge (reward = fidelity). Every regulariser
is fixed a priori and equal for both methods: the KL coefficient to the warm-up policy is 0.04
for GRPO and RAPO (``_pipeline.KL_BETA``: DeepSeekMath's GRPO value, TRL's former default), RAPO's
alpha = 1, gamma = 0.5; only the Adam step size is tuned, on one grid shared by both methods
(3e-4, 1e-3), by the best mean validation reward of the judge the method trains on (validation
characters; ``_pipeline.chosen``). The RL rows are scored by the exact judge and the
generic-phrase rate on held-out test characters (stereotyped, never seen in training nor used for
tuning), the warm-up rows of ``ood_profiles`` on characters that break the stereotype (unseen
trait combinations).
Preconditions: ``grpo_hacks`` (the hackable judge is hacked at all: GRPO's proxy reward rose while
its fidelity fell) for ``hacking`` and ``hacking_phrases``; ``ood_shift_exists`` (the plain
warm-up does worse on the stereotype-breaking characters than on held-out characters of its
training distribution, and is below a ceiling) for ``ood_profiles``. ``exact_judge`` is the sanity
check (a tie within 0.05 both ways).

Scope: the ``hacking`` and ``hacking_phrases`` verdicts are for one hackable judge, generic pay g =
1.5 (set before any run). A referee's sweep on an earlier grid (beta tuned too) found the
generic-phrase gap at every g tried (1.25, 1.5, 2) and the fidelity gap decided at g = 1.5 only
(``results/P05/NOTES.md``): neither claim is shown for hackable judges in general.
Out of reach at the quick size: 5 seeds, 60 RL steps and a two-point step-size grid resolve
differences of a few hundredths; longer training, other KL coefficients and RAPO's alpha / gamma
are not measured. The ``hacking`` extras hold both methods at every grid point with per-seed
paired intervals, the fidelity-vs-proxy-reward path along training (the gold-vs-proxy frontier,
on the training rollouts), and the hackable-judge cells selected by validation fidelity instead
of their reward (a sensitivity check). Measured numbers and their history:
``results/P05/NOTES.md``.
"""

from __future__ import annotations

from jaxpapers.core.experiment import AllOf, Better, Experiment, NoWorse, Threshold
from jaxpapers.rapo.experiments import _run
from jaxpapers.rapo.experiments._pipeline import Config

SIZES = {
    "smoke": Config(
        d_model=16,
        layers=1,
        sft_steps=10,
        sft_batch=16,
        rl_steps=3,
        prompts_per_step=4,
        group_size=4,
        eval_prompts=32,
    ),
    "quick": Config(
        d_model=32,
        layers=2,
        sft_steps=400,
        sft_batch=32,
        rl_steps=60,
        prompts_per_step=8,
        group_size=8,
        eval_prompts=256,
    ),
    "full": Config(
        d_model=64,
        layers=2,
        sft_steps=3000,
        sft_batch=64,
        rl_steps=400,
        prompts_per_step=16,
        group_size=8,
        eval_prompts=1024,
    ),
}


#: ``exact_judge``'s equivalence margin, in held-out fidelity (the fraction of the three reply
#: tokens that are the ideal ones, over 256 held-out prompts at the quick size: one token is
#: 1/768): the two methods tie when each is within 0.05 of the other, one reply token in twenty
TIE_MARGIN = 0.05

#: the row suffix of ``grpo_hacks``'s reward rows (the hackable judge's reward, not fidelity)
REWARD = ": hackable reward"

#: ``ood_shift_exists``'s reference row (the plain warm-up on held-out stereotyped characters)
IN_DISTRIBUTION = _run.IN_DISTRIBUTION

#: ``ood_shift_exists``'s ceiling: below it the plain warm-up misses at least one reply token
#: in twenty on out-of-distribution profiles, room for a better warm-up to show (the same
#: one-token-in-twenty scale as ``TIE_MARGIN``)
OOD_CEILING = 0.95


EXPERIMENTS = (
    Experiment(
        id="exact_judge",
        claim="Sanity: with an unhackable judge (reward = exact fidelity) GRPO and RAPO tie within "
        f"{TIE_MARGIN:g} fidelity both ways (and RAPO with unit weights equals GRPO exactly; see "
        "extras)",
        metric="held-out character fidelity after RL",
        lower_is_better=False,
        baselines=("GRPO (exact judge)",),
        methods=("RAPO (exact judge)",),
        # a two-sided equivalence: here the reward IS the fidelity (held-out profiles), so no
        # method is claimed better on it; the check is that RAPO's weights cost nothing when the
        # judge cannot be hacked
        rule=AllOf(
            (
                NoWorse("RAPO (exact judge)", "GRPO (exact judge)", margin=TIE_MARGIN),
                NoWorse("GRPO (exact judge)", "RAPO (exact judge)", margin=TIE_MARGIN),
            )
        ),
        run=_run.exact_judge,
    ),
    Experiment(
        id="grpo_hacks",
        claim="Precondition of hacking and hacking_phrases: the hackable judge is hacked, i.e. "
        "GRPO trained on it ends below the warm-up's held-out fidelity WHILE the hackable "
        "judge's reward (the proxy GRPO optimised) rose above the warm-up's",
        metric="held-out character fidelity (exact rule) in the plain rows and the hackable "
        f"judge's mean reward in the '{REWARD}' rows (held-out profiles, both higher is "
        "better), warm-up vs after GRPO on the hackable judge",
        lower_is_better=False,
        baselines=("GRPO", f"warm-up (before RL){REWARD}"),
        methods=("warm-up (before RL)", f"GRPO{REWARD}"),
        # hacking is both halves at once: the proxy went up and the true quantity went down; a
        # fall in fidelity alone is plain degradation, not reward hacking
        rule=AllOf(
            (
                Better("warm-up (before RL)", "GRPO"),
                Better(f"GRPO{REWARD}", f"warm-up (before RL){REWARD}"),
            )
        ),
        run=_run.grpo_hacks,
    ),
    Experiment(
        id="hacking",
        claim="Under a hackable judge (one that overrates generic phrases), RAPO keeps more "
        "character fidelity (role-specific reply tokens in their place) than GRPO",
        metric="held-out character fidelity (exact judge) after RL on the hackable judge",
        lower_is_better=False,
        baselines=("GRPO", "warm-up (before RL)"),
        methods=("RAPO",),
        # judged by the exact fidelity rule (from the profile), which neither policy sees in
        # these cells: they train on the hackable judge's reward, so the judge of the verdict is
        # independent of the reward that was optimised (that reward is in the extras)
        rule=Better("RAPO", "GRPO"),
        run=_run.hacking,
        plot=_run.plot_hacking,
        requires=("grpo_hacks",),
    ),
    Experiment(
        id="hacking_phrases",
        claim="Under a hackable judge, RAPO says fewer generic reward-hacking phrases than GRPO",
        metric="fraction of reply tokens that are generic flattery (held-out profiles)",
        lower_is_better=True,
        baselines=("GRPO", "warm-up (before RL)"),
        methods=("RAPO",),
        # a count of generic tokens in the reply, not the hackable reward the policies trained on
        rule=Better("RAPO", "GRPO"),
        run=_run.hacking_phrases,
        requires=("grpo_hacks",),
    ),
    Experiment(
        id="ood_shift_exists",
        claim="Precondition of ood_profiles: characters that break the training stereotype "
        "(unseen trait combinations) are out of distribution for the plain warm-up, i.e. its "
        "greedy fidelity on them is below its fidelity on held-out characters of its training "
        f"distribution (stereotyped, never trained on) AND below {OOD_CEILING:g}, so a better "
        "warm-up has room to show",
        metric="character fidelity (greedy replies) of the plain warm-up on stereotype-breaking "
        "characters and on held-out stereotyped characters",
        lower_is_better=False,
        baselines=("plain warm-up",),
        methods=(IN_DISTRIBUTION,),
        # a real shift is a drop from unseen characters of the training distribution, not only a
        # low score (a bed where every character is hard would pass the threshold alone) nor a
        # drop from the memorised training characters (that is partly memorisation)
        rule=AllOf(
            (
                Better(IN_DISTRIBUTION, "plain warm-up"),
                Threshold("plain warm-up", OOD_CEILING),
            )
        ),
        run=_run.ood_shift,
    ),
    Experiment(
        id="ood_profiles",
        claim="A Psy-CoT warm-up generalises to unseen profiles better than a plain warm-up",
        metric="character fidelity (greedy replies) on characters that break the training "
        "stereotype (unseen trait combinations)",
        lower_is_better=False,
        baselines=("plain warm-up",),
        methods=("Psy-CoT warm-up",),
        rule=Better("Psy-CoT warm-up", "plain warm-up"),
        run=_run.ood_profiles,
        requires=("ood_shift_exists",),
    ),
)
