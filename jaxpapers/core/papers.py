"""The nineteen papers: id, short title and the subpackage that implements each."""

from __future__ import annotations

import importlib.util
from typing import NamedTuple


class Paper(NamedTuple):
    """One paper: its id, a short title and the subpackage that implements it."""

    id: str
    title: str
    module: str

    @property
    def import_name(self) -> str:
        return f"jaxpapers.{self.module}"

    @property
    def implemented(self) -> bool:
        """True when ``jaxpapers.<module>.experiments`` exists (it registers the paper's runs)."""
        try:
            return importlib.util.find_spec(f"{self.import_name}.experiments") is not None
        except ModuleNotFoundError:
            return False


PAPERS: tuple[Paper, ...] = (
    Paper("P01", "CODI: cross distillation for SSL ViTs", "codi"),
    Paper("P02", "LQZO: low-rank quantized zeroth-order fine-tuning", "lqzo"),
    Paper("P03", "Cayley-Encoder: GNN over LLM layers", "cayley"),
    Paper("P04", "SCALE: self-contrastive guidance, guidance-free", "scale"),
    Paper("P05", "Psy-CoT + RAPO for role-playing agents", "rapo"),
    Paper("P06", "kFFM: kernel functional flow matching", "kffm"),
    Paper("P07", "LAMP: lagged second-order posterior sampling", "lamp"),
    Paper("P08", "STEAM: continual video instance segmentation", "steam"),
    Paper("P09", "ContrastiveCAMs + context-regularized CE", "crce"),
    Paper("P10", "Counterfactual Shapley values", "cfshap"),
    Paper("P11", "Petri realism: critique refinement and DISH", "audit"),
    Paper("P12", "RO-PMB: prototype memory bank with GNN for WSSS", "ropmb"),
    Paper("P13", "H-LRU / BD-LRU: structured linear recurrences", "lrnn"),
    Paper("P14", "CCE in multi-player general-sum Markov games", "markov_games"),
    Paper("P15", "Tabular RL under local differential privacy", "ldp_rl"),
    Paper("P16", "Stable online multiclass classification", "multiclass"),
    Paper("P17", "Implicit-Euler value iteration", "ievi"),
    Paper("P18", "IVP: implicit value probing benchmark", "ivp"),
    Paper("P19", "Neural graphon optimisation", "graphons"),
)

PAPERS_BY_ID: dict[str, Paper] = {p.id: p for p in PAPERS}


def get_paper(paper_id: str) -> Paper:
    """Look a paper up by id (``"P17"``, case-insensitive) or by module name (``"ievi"``)."""
    key = paper_id.strip()
    if key.upper() in PAPERS_BY_ID:
        return PAPERS_BY_ID[key.upper()]
    for paper in PAPERS:
        if paper.module == key.lower():
            return paper
    valid = ", ".join(p.id for p in PAPERS)
    raise ValueError(f"unknown paper {paper_id!r}; expected one of {valid} or a module name")
