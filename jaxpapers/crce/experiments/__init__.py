"""P09 experiments (``jaxpapers reproduce P09``): the claims, their rules and the run sizes.

* ``faith_models_trained`` (precondition of ``faithfulness``): the explained three-class CE
  models are trained: their mean test accuracy is above 0.5 (chance is 1/3; see
  :data:`FAITH_ACCURACY_MIN`). A map of an untrained model explains nothing.
* ``maps_can_differ`` (precondition of ``faithfulness``): on the explained models, ContrastiveCAM
  and CAM delete different cells along a deletion curve (at least a tenth of the deleted cells
  differ, averaged over the curve's steps), so deletion AUCs can separate them either way.
* ``faithfulness``: three-class CE models (square, ring, cross on stripes or smooth noise drawn
  independently of the label; ``faith_steps`` Adam steps); deletion AUC of the predicted class's
  probability for ContrastiveCAM, Grad-CAM and CAM (lower = more faithful); insertion AUC,
  pointing game, mask agreement, test accuracy and the head's class-shared component in the
  extras. Why three classes: for a GAP-linear head Grad-CAM is CAM / (h w), so the two always
  rank cells alike; with two classes ContrastiveCAM is CAM minus the class-shared part of the
  head, a fixed map per model. With three or more it also subtracts the softmax-weighted other
  classes of each image, so it can rank the cells of an image unlike CAM (a unit test builds an
  image where CAM deletes evidence shared by every class first and ContrastiveCAM the class's
  own evidence).
* ``context_shift_exists`` (precondition of the two context-shift comparisons): the training
  shortcut costs plain CE more than 0.1 between its mean-group and worst-group accuracy.
* ``context_shift`` (headline): Waterbirds-like scenes (class 0 = square on stripes, class 1 = ring
  on smooth noise in 95% of the training images); worst-group accuracy on a balanced test set for
  CE, Grad-CAM-regularised CE and CR-CE with known context (judged), and CR-CE with estimated
  context (reported, judged by no rule; trained at full size only, ``row_sizes``, since
  2026-12-05: its tuning grid and per-seed models were 8 of the quick run's 67.5
  model-equivalents); reversed-context accuracy, ContrastiveCAM share on context, collapse flags
  (constant predictions) and the tuning table in the extras.
* ``context_shift_baselines``: the same models against the baselines a reader expects for context
  shift: GroupDRO (group labels on the training split; the online group-weight update of Sagawa
  et al. 2020 on group-balanced minibatches, the reference recipe), group-balanced CE (plain CE on
  the same group-balanced minibatches; group labels, nothing to tune) and background
  randomisation (each training image's background replaced, with a tuned probability, by a
  background drawn independently of the label; it uses the object masks that CR-CE with known
  context uses). The abstract claims improvements in robustness, not over
  these; the comparison is judged as strongly as the headline (``Better`` against each).
* ``no_context_information`` (sanity): CE and CR-CE trained with backgrounds independent of the
  label; the context carries no information, so CR-CE must match CE (two-sided equivalence
  within 0.03 accuracy).

Every rule is a one-sided 95% t test on per-seed values (paired: each seed's models share their
training set, initial weights and minibatch order).

Tuning: every method with a hyperparameter (``beta`` of the context regularisers, GroupDRO's
step size, background randomisation's probability) is trained once per value of its grid
(``Config``: the same number of values for each, 3 at quick size and 6 at full size) on the shift
training set, initial weights and minibatch order of a tuning seed that is never judged
(``_runs.TUNING_SEED``), with the run's steps (200 at quick size), and the value with the best
worst-group accuracy on the balanced validation set (seed 17; never a test set) is used for every
judged seed. Every judged row is a fresh model, so no row is the best of its grid on its own seed
(until 2026-12-05 the tuning ran on judged seed 0 and its best run was seed 0's row: a winner's
bias on one seed of the tuned methods only). The no-context CR-CE uses the beta chosen under
shift. The quick grids are the three-value windows around each method's best value of a wider
exploration on the same validation set (training seed 0; ``results/P09/NOTES.md``): beta 1, 3, 10,
step size 0.01, 0.03, 0.1, probability 0.5, 0.75, 1. Choosing per seed on that seed's validation
set (the whole pipeline repeated per seed) would cost the grid size times the tuned models
(~45 more models at quick size, past the quick budget).

Every model shares one compiled training step per class count (methods differ by arguments;
GroupDRO's loss is a program of its own); models are trained one after the other with the step
called from Python (see ``_train``).

What remains out of reach at quick size: 200 steps on 1,024 training images (about 25 images in
each minority group, each seen ~100 times under group-balanced sampling) leave GroupDRO and
group-balanced CE short of the many epochs they are normally run for; one tuning seed chooses a
single value per method, which a method that collapses on some seeds at that value (a constant
predictor) pays for on those seeds; 300 steps leave a three-class model near chance on a weak
initialisation (seed 3: 38%, chance 33%; the precondition judges the mean); the 5-seed spread
of the faithfulness differences is as wide as the differences; CR-CE with estimated context
(judged by no rule) is not trained, so the quick run shows no number for it (the last quick
numbers, 2026-12-05, are in ``results/P09/NOTES.md``).
``--full`` trains 4,000 steps on 8,192 images with six-value grids.
"""

from __future__ import annotations

import functools

from jaxpapers.core.experiment import AllOf, Better, Experiment, NoWorse, Threshold
from jaxpapers.crce.experiments._plots import plot_faithfulness, plot_groups
from jaxpapers.crce.experiments._runs import (
    CE_GAP,
    DISAGREEMENT,
    FAITH_ACCURACY,
    MAPS,
    NO_CONTEXT_METHODS,
    ROW_SIZES,
    Config,
    run_context_shift,
    run_faith_trained,
    run_faithfulness,
    run_maps_differ,
    run_no_context,
    run_shift_exists,
)
from jaxpapers.crce.experiments._train import METHODS

SIZES = {
    "smoke": Config(
        steps=3,
        batch=8,
        train_n=32,
        test_n=16,
        faith_n=4,
        faith_steps=3,
        curve_steps=2,
        widths=(4, 8),
        lr=3e-3,
        beta_grid=(1.0, 3.0),
        group_dro_grid=(0.1, 1.0),
        randomise_grid=(0.5, 1.0),
    ),
    "quick": Config(
        steps=200,
        batch=64,
        train_n=1024,
        test_n=512,
        faith_n=64,
        faith_steps=300,
        curve_steps=8,
        widths=(8, 16),
        lr=3e-3,
        beta_grid=(1.0, 3.0, 10.0),
        group_dro_grid=(0.01, 0.03, 0.1),
        randomise_grid=(0.5, 0.75, 1.0),
    ),
    "full": Config(
        steps=4000,
        batch=128,
        train_n=8192,
        test_n=4096,
        faith_n=512,
        faith_steps=4000,
        curve_steps=32,
        widths=(32, 64),
        lr=1e-3,
        beta_grid=(0.3, 1.0, 3.0, 10.0, 30.0, 100.0),
        group_dro_grid=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3),
        randomise_grid=(0.1, 0.25, 0.5, 0.75, 0.9, 1.0),
    ),
}

CE, GRADCAM_CE = "CE", "Grad-CAM-regularised CE"
CRCE_KNOWN, CRCE_ESTIMATED = "CR-CE (known context)", "CR-CE (estimated context)"
GROUP_DRO, BACKGROUND = "GroupDRO", "Background randomisation"
BALANCED_CE = "Group-balanced CE"
assert set(METHODS) == {
    CE,
    GRADCAM_CE,
    CRCE_KNOWN,
    CRCE_ESTIMATED,
    GROUP_DRO,
    BACKGROUND,
    BALANCED_CE,
}
assert NO_CONTEXT_METHODS == (CE, CRCE_KNOWN)
assert set(ROW_SIZES) == {CRCE_ESTIMATED}  # the one unjudged row; full (and smoke) only

#: ``faith_models_trained``: the three-class models' mean test accuracy must exceed 0.5. Chance
#: is 1/3; on the 64 test images of the quick size an accuracy's binomial standard error at
#: chance is 0.059, so 0.5 is chance plus about three standard errors. Chosen before the
#: 5-seed numbers of the rule were seen (the models were: 0.38-0.92 per seed).
FAITH_ACCURACY_MIN = 0.5

#: ``maps_can_differ``: the deletion curves of two maps differ only through the cells that one
#: map deletes before the other; at least a tenth of the deleted cells must differ on average
#: over the curve's steps (one cell in ten removed by a different choice). Chosen before the
#: 5-seed numbers were seen.
DISAGREEMENT_MIN = 0.1

#: ``context_shift_exists``: plain CE's worst group must trail its mean over the four groups by
#: more than 0.1. With 128 balanced test images per group a group accuracy's binomial standard
#: error is at most 0.044, and the minimum of four such noisy accuracies falls about one standard
#: error below their mean with no shift at all; 0.1 is over twice that. Chosen before the 5-seed
#: numbers were seen.
SHIFT_GAP_MIN = 0.1

#: ``no_context_information``: "ties" is a two-sided equivalence within 0.03 accuracy (three
#: binomial standard errors of one model's accuracy on the 512 balanced test images at the ~0.95
#: that CE reaches; a tenth of the worst-group gain CR-CE is credited with under shift would be
#: larger). Chosen before the 5-seed numbers were seen.
TIE_MARGIN = 0.03

EXPERIMENTS = (
    Experiment(
        id="faith_models_trained",
        claim="Precondition of faithfulness: the explained three-class CE models are trained, "
        f"their mean test accuracy above {FAITH_ACCURACY_MIN} (chance 1/3)",
        metric="accuracy of the predicted class on the explained test images",
        lower_is_better=False,
        baselines=(),
        methods=(FAITH_ACCURACY,),
        rule=Threshold(FAITH_ACCURACY, FAITH_ACCURACY_MIN, below=False),
        run=run_faith_trained,
    ),
    Experiment(
        id="maps_can_differ",
        claim="Precondition of faithfulness: on the three-class models ContrastiveCAM and CAM "
        f"order the cells differently, at least {DISAGREEMENT_MIN} of the cells deleted along "
        "a deletion curve differ",
        metric="mean over the curve's steps and the test images of the share of cells deleted "
        "by ContrastiveCAM's order and not yet by CAM's",
        lower_is_better=False,
        baselines=(),
        methods=(DISAGREEMENT,),
        rule=Threshold(DISAGREEMENT, DISAGREEMENT_MIN, below=False),
        run=run_maps_differ,
    ),
    Experiment(
        id="context_shift_exists",
        claim="Precondition of context_shift and context_shift_baselines: the training shortcut "
        "hurts plain CE, its "
        f"worst-group accuracy trails its mean over the groups by more than {SHIFT_GAP_MIN}",
        metric="balanced mean-group minus worst-group accuracy of CE",
        lower_is_better=False,
        baselines=(),
        methods=(CE_GAP,),
        rule=Threshold(CE_GAP, SHIFT_GAP_MIN, below=False),
        run=run_shift_exists,
    ),
    Experiment(
        id="faithfulness",
        claim="ContrastiveCAM is more faithful to the prediction than Grad-CAM and CAM "
        "(lower deletion AUC), on three-class models",
        metric="deletion AUC of the predicted class's probability (mean over test images)",
        lower_is_better=True,
        baselines=MAPS[1:],
        methods=MAPS[:1],
        rule=AllOf(tuple(Better(MAPS[0], b) for b in MAPS[1:])),
        run=run_faithfulness,
        plot=plot_faithfulness,
        requires=("faith_models_trained", "maps_can_differ"),
    ),
    Experiment(
        id="context_shift",
        claim="CR-CE has higher worst-group accuracy than CE under context shift, and than CE "
        "regularised with Grad-CAM (an existing attribution) in place of ContrastiveCAM",
        metric="worst-group accuracy on a balanced test set (groups = class x context)",
        lower_is_better=False,
        baselines=(CE, GRADCAM_CE),
        methods=(CRCE_KNOWN, CRCE_ESTIMATED),
        rule=AllOf((Better(CRCE_KNOWN, CE), Better(CRCE_KNOWN, GRADCAM_CE))),
        run=functools.partial(run_context_shift, rows=(CE, GRADCAM_CE, CRCE_KNOWN, CRCE_ESTIMATED)),
        plot=plot_groups,
        row_sizes={CRCE_ESTIMATED: ROW_SIZES[CRCE_ESTIMATED]},
        requires=("context_shift_exists",),
    ),
    Experiment(
        id="context_shift_baselines",
        claim="CR-CE has higher worst-group accuracy under context shift than the standard "
        "context-shift baselines, each tuned like CR-CE: GroupDRO (group labels, group-balanced "
        "minibatches), group-balanced CE (group labels, untuned) and background randomisation "
        "(object masks, as CR-CE)",
        metric="worst-group accuracy on a balanced test set (groups = class x context)",
        lower_is_better=False,
        baselines=(GROUP_DRO, BALANCED_CE, BACKGROUND),
        methods=(CRCE_KNOWN,),
        rule=AllOf(
            (
                Better(CRCE_KNOWN, GROUP_DRO),
                Better(CRCE_KNOWN, BALANCED_CE),
                Better(CRCE_KNOWN, BACKGROUND),
            )
        ),
        run=functools.partial(
            run_context_shift, rows=(GROUP_DRO, BALANCED_CE, BACKGROUND, CRCE_KNOWN)
        ),
        plot=plot_groups,
        requires=("context_shift_exists",),
    ),
    Experiment(
        id="no_context_information",
        claim="Sanity: when the background is independent of the label, CR-CE ties with CE "
        f"(accuracies within {TIE_MARGIN} of each other)",
        metric="accuracy on a balanced test set",
        lower_is_better=False,
        baselines=(CE,),
        methods=(CRCE_KNOWN,),
        rule=AllOf(
            (
                NoWorse(CRCE_KNOWN, CE, margin=TIE_MARGIN),
                NoWorse(CE, CRCE_KNOWN, margin=TIE_MARGIN),
            )
        ),
        run=run_no_context,
    ),
)
