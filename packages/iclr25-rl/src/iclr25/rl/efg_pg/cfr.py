"""CFR+ (regret matching+, alternating updates, linear averaging): the reference baseline."""

from __future__ import annotations

import numpy as np

from iclr25.core.progress import progress

from ._validate import check_int
from .games import Game, check_game
from .policy import TabularPolicy
from .values import cf_values, exploitability

__all__ = ["CFRPlus"]


class CFRPlus:
    """CFR+ self-play on exact counterfactual values (numpy).

    Parameters
    ----------
    game : Game

    Attributes
    ----------
    iteration : int
    current : (nI, A) float64
        The current strategy (regret matching+ on the clipped cumulative regrets).
    log : list of dict
        ``{"iter", "exploitability"}`` of the average policy, filled by :meth:`run` when
        ``eval_every`` is set.
    """

    def __init__(self, game: Game) -> None:
        self.game = check_game(game)
        self._ar = game.arrays("numpy")
        self._mask = game.mask
        self.current = game.mask / game.num_actions[:, None]
        self._regret = np.zeros(game.mask.shape)
        self._avg = np.zeros(game.mask.shape)
        self.iteration = 0
        self.log: list[dict[str, float]] = []

    def _matched(self) -> np.ndarray:
        pos = np.maximum(self._regret, 0.0) * self._mask
        tot = pos.sum(1, keepdims=True)
        uniform = self._mask / self.game.num_actions[:, None]
        return np.where(tot > 0, pos / np.where(tot > 0, tot, 1.0), uniform)

    @property
    def average(self) -> TabularPolicy:
        """The reach- and iteration-weighted average strategy (the CFR+ output)."""
        tot = self._avg.sum(1, keepdims=True)
        uniform = self._mask / self.game.num_actions[:, None]
        return TabularPolicy(self.game, np.where(tot > 0, self._avg / np.where(tot > 0, tot, 1.0), uniform))

    def step(self) -> None:
        """One alternating CFR+ iteration (player 0 then player 1)."""
        self.iteration += 1
        t = self.iteration
        for p in (0, 1):
            rows = self.game.infoset_player == p
            cf, _, own = cf_values(self._ar, self.current, 0.0)
            ev = (self.current * cf).sum(1, keepdims=True)
            inst = (cf - ev) * self._mask
            self._regret[rows] = np.maximum(self._regret[rows] + inst[rows], 0.0)
            # Linear averaging weights iteration t by t, and each row by the owner's reach.
            self._avg[rows] += t * own[rows, None] * self.current[rows]
            self.current = np.where(rows[:, None], self._matched(), self.current)

    def run(self, iters: int, eval_every: int | None = None) -> TabularPolicy:
        """Run ``iters`` iterations and return the average policy.

        Parameters
        ----------
        iters : int
        eval_every : int, optional
            Record the average policy's exploitability in :attr:`log` this often.
        """
        iters = check_int("iters", iters, 0)
        if eval_every is not None:
            try:
                eval_every = check_int("eval_every", eval_every, 1)
            except ValueError:
                raise ValueError(f"eval_every must be a positive int or None, got {eval_every!r}") from None
        for _ in progress(range(iters), desc="CFR+", total=iters):
            self.step()
            if eval_every and self.iteration % eval_every == 0:
                self.log.append({"iter": self.iteration, "exploitability": exploitability(self.game, self.average)})
        return self.average
