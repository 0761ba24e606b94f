"""Biologically constrained barrel cortex RSNN (ICLR 2025).

*Biologically Constrained Barrel Cortex Model Integrates Whisker Inputs and Replicates Key Brain
Network Dynamics* (ICLR 2025, OpenReview https://openreview.net/forum?id=UvfI4grcM7; no arXiv id
found); official code https://github.com/fun0515/Barrel-Cortex-RSNN.

A recurrent spiking network of one mouse barrel-cortex column: 13 populations (L4 and L2/3, 4,218
ALIF neurons) with sizes, Dale signs and pairwise connection probabilities from Huang, Zeldenrust
& Celikel (2022), fixed seeded Bernoulli masks and non-negative weights clamped to [0, 1]. Whisker
force and torque spikes drive 200 thalamic ALIF neurons, which drive cortex; a readout of the
excitatory populations classifies the object swept past the whiskers. The package also holds an
offline whisker-sweep simulator with the original data layout and the paper's analyses::

    force/torque [N,S,110,31,3,3] ─ to_spikes ─ [N,2,S,T,93] ─ BarrelCortexRSNN ─ scores [N,3]
                                                                  └ record ─ spikes [N,T,4218]
                                                                     ├ selectivity_anova
                                                                     └ firing_statistics
"""

from .analysis import evaluate, firing_statistics, selectivity_anova, train_barrel, whisker_deprivation_curve
from .network import BarrelCortexRSNN, ConstrainedSpikingNetwork
from .populations import BARREL_CONNECTIVITY, BARREL_POPULATIONS, ConnectivitySpec, Population
from .whiskers import OBJECTS, WhiskerSweepSimulator, deprive_whiskers, make_whisker_dataset, to_spikes

__all__ = [
    "BARREL_CONNECTIVITY",
    "BARREL_POPULATIONS",
    "OBJECTS",
    "BarrelCortexRSNN",
    "ConnectivitySpec",
    "ConstrainedSpikingNetwork",
    "Population",
    "WhiskerSweepSimulator",
    "deprive_whiskers",
    "evaluate",
    "firing_statistics",
    "make_whisker_dataset",
    "selectivity_anova",
    "to_spikes",
    "train_barrel",
    "whisker_deprivation_curve",
]
