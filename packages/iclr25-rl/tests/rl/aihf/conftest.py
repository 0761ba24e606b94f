"""The small gridworld problem shared by the usability and input-contract tests."""

import numpy as np
import pytest

from iclr25.rl.aihf import TrajectoryDataset, synthetic_preferences, tabular

GAMMA, H = 0.9, 30


@pytest.fixture(scope="module")
def data():
    """(gridworld, 10 soft-optimal demonstrations, 20 BT pairs) for a random 6-feature reward."""
    gw = tabular.GridWorld(seed=0)
    theta_star = np.random.default_rng(0).normal(size=6)
    expert = tabular.plan(gw, np.repeat((gw.phi @ theta_star)[:, None], 5, 1), GAMMA, 1.0)
    D = TrajectoryDataset.from_rollouts(gw.rollouts(expert, 10, H, 1))
    pool = gw.rollouts(np.full((25, 5), 0.2), 100, H, 2)

    def ret(seg):
        return float(GAMMA ** np.arange(len(seg[0])) @ (gw.phi[seg[0]] @ theta_star))

    return gw, D, synthetic_preferences(pool, ret, 1.0, 20, 3)
