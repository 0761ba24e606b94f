"""Tabular behavioural policies over a game's infosets, with input validation."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import check_real
from .games import Game, check_game

__all__ = ["TabularPolicy", "as_probs"]

ROW_TOL = 1e-6


def as_probs(game: Game, probs: Any, name: str = "policy") -> Any:
    """Validate a ``(nI, A)`` probability table and return a float64 copy (numpy or torch).

    Parameters
    ----------
    game : Game
        The game the table belongs to.
    probs : TabularPolicy, numpy array or torch tensor, shape (nI, A)
        Row ``I`` is ``sigma(.|I)`` over the infoset's action columns; padded columns must be 0.
    name : str
        Argument name used in error messages.

    Raises
    ------
    ValueError
        Wrong shape, NaN/inf, negative entries, mass on illegal actions or rows not summing to 1
        (tolerance 1e-6).
    TypeError
        Not an array, or a complex one.
    """
    if isinstance(probs, TabularPolicy):
        probs = probs.probs
    shape = (game.num_infosets, game.max_actions)
    if isinstance(probs, np.ndarray):
        if np.iscomplexobj(probs):
            raise TypeError(f"{name} must be a real array, got dtype {probs.dtype}")
        arr = probs.astype(np.float64, copy=True)
        mask = game.mask
        lib = np
    else:
        try:
            import torch
        except ImportError:  # pragma: no cover
            torch = None
        if torch is None or not isinstance(probs, torch.Tensor):
            raise TypeError(f"{name} must be a numpy array, torch tensor or TabularPolicy, got {type(probs).__name__}")
        if probs.is_complex() or not probs.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {probs.dtype}")
        arr = probs.detach().to(torch.float64).clone()
        mask = torch.as_tensor(game.mask, device=arr.device)
        lib = torch
    if tuple(arr.shape) != shape:
        raise ValueError(f"{name} must have shape (num_infosets, max_actions) = {shape}, got {tuple(arr.shape)}")
    if not bool(lib.isfinite(arr).all()):
        raise ValueError(f"{name} must be finite, got NaN or inf entries")
    if bool((arr < 0).any()):
        raise ValueError(f"{name} must be non-negative, got min {float(arr.min()):.3g}")
    illegal = arr * (~mask)
    if bool((illegal > 0).any()):
        raise ValueError(f"{name} puts mass {float(illegal.max()):.3g} on an illegal (padded) action")
    err = lib.abs(arr.sum(1) - 1.0)
    if bool((err > ROW_TOL).any()):
        raise ValueError(f"{name} rows must sum to 1 (tolerance {ROW_TOL}), got max deviation {float(err.max()):.3g}")
    return arr


class TabularPolicy:
    """A behavioural strategy profile: one distribution over legal actions per infoset.

    Parameters
    ----------
    game : Game
        The game.
    probs : (nI, A) array or tensor
        Rows over each infoset's action columns (see :attr:`Game.infoset_actions`), padded columns
        zero. Validated and copied to float64.

    Attributes
    ----------
    probs : (nI, A) float64 numpy array or torch tensor
    """

    def __init__(self, game: Game, probs: Any) -> None:
        self.game = check_game(game)
        self.probs = as_probs(game, probs, "probs")

    @classmethod
    def uniform(cls, game: Game) -> TabularPolicy:
        """The uniform policy over legal actions at every infoset."""
        check_game(game)
        return cls(game, game.mask / game.num_actions[:, None])

    @classmethod
    def random(cls, game: Game, seed: int = 0, concentration: float = 1.0) -> TabularPolicy:
        """A Dirichlet(``concentration``) random policy, reproducible from ``seed``.

        Raises
        ------
        ValueError
            ``concentration`` is not a finite number ``> 0``, or so small that every gamma draw of
            some infoset underflows to 0 (the row is undefined).
        """
        check_game(game)
        concentration = check_real("concentration", concentration)
        if concentration <= 0:
            raise ValueError(f"concentration must be > 0, got {concentration}")
        rng = np.random.default_rng(seed)
        g = rng.gamma(concentration, size=game.mask.shape) * game.mask
        tot = g.sum(1, keepdims=True)
        if not bool((tot > 0).all()):
            raise ValueError(
                f"concentration={concentration:g} is too small: every draw of some infoset underflowed to 0; "
                "use a larger concentration"
            )
        return cls(game, g / tot)

    def numpy(self) -> np.ndarray:
        """The table as a float64 numpy array (a copy when on a torch device)."""
        if isinstance(self.probs, np.ndarray):
            return self.probs
        return self.probs.detach().cpu().numpy()

    def action_probabilities(self, key: Any) -> dict[int, float]:
        """``{native action id: probability}`` at an infoset.

        Parameters
        ----------
        key : str or state
            The information-state string, or an OpenSpiel-style state at a decision node (its
            ``information_state_string()`` is used). With a state this matches OpenSpiel's
            ``Policy.action_probabilities(state)``, so
            ``open_spiel.python.policy.tabular_policy_from_callable(os_game, pol.action_probabilities)``
            exports the policy for a game built with :func:`~iclr25.rl.efg_pg.games.from_openspiel`.
        """
        if not isinstance(key, str) and hasattr(key, "information_state_string"):
            key = key.information_state_string()
        i = self.game.infoset_index(key)
        row = self.numpy()[i]
        return {a: float(row[j]) for j, a in enumerate(self.game.infoset_actions[i])}

    def __repr__(self) -> str:
        return f"TabularPolicy({self.game.name!r}, shape={tuple(self.probs.shape)})"
