"""Tabular two-player zero-sum extensive-form games as level-vectorized arrays.

A game is built once by walking its tree depth-first from a *state* object with OpenSpiel's
interface (``is_terminal``, ``returns``, ``is_chance_node``, ``chance_outcomes``,
``current_player``, ``legal_actions``, ``information_state_string``, ``child``). The result is a
:class:`Game` of flat arrays indexed by history, grouped by depth, so every solver pass is a short
loop over depths of gathers and scatter-adds (numpy or torch, CPU or CUDA).

Built-in games follow OpenSpiel's rules and action ids exactly (``kuhn_poker``: pass=0, bet=1;
``leduc_poker``: fold=0, call=1, raise=2), so policies can be compared with OpenSpiel's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["Game", "GameState", "build_game", "check_game", "from_openspiel", "kuhn_poker", "leduc_poker"]

logger = logging.getLogger(__name__)

CHANCE = 2
TERMINAL = 3


class GameState(Protocol):
    """The state interface a game is built from (a subset of ``pyspiel.State``)."""

    def is_terminal(self) -> bool: ...
    def returns(self) -> list[float]: ...
    def is_chance_node(self) -> bool: ...
    def chance_outcomes(self) -> list[tuple[int, float]]: ...
    def current_player(self) -> int: ...
    def legal_actions(self) -> list[int]: ...
    def information_state_string(self) -> str: ...
    def child(self, action: int) -> GameState: ...


@dataclass(eq=False)
class Game:
    """A two-player zero-sum perfect-recall game as flat arrays (histories sorted by depth).

    Attributes
    ----------
    name : str
        Human-readable name.
    num_histories : int
        ``H``, number of histories (decision, chance and terminal nodes).
    num_infosets : int
        ``nI``, number of information sets of both players.
    max_actions : int
        ``A``, the largest number of legal actions at any infoset (chance fan-out excluded).
    parent : (H,) int64
        Parent history, ``-1`` at the root.
    parent_action : (H,) int64
        Column of the edge from the parent: action column at a decision parent, outcome index at
        a chance parent.
    kind : (H,) int8
        0 / 1: decision node of that player, 2: chance, 3: terminal.
    infoset : (H,) int64
        Infoset of a decision node, ``-1`` elsewhere.
    chance_prob : (H,) float64
        Probability of the edge from a chance parent (1 for other edges).
    utility : (H,) float64
        Player 0's payoff at terminals (player 1 gets the negative), 0 elsewhere.
    children : (H, C) int64
        Child by column, ``-1`` padded (``C`` is the largest fan-out, chance included).
    levels : list of (n_d,) int64
        Histories at each depth; ``levels[0] == [0]`` is the root.
    infoset_player : (nI,) int64
        Owner of each infoset.
    infoset_depth : (nI,) int64
        Depth of the histories in each infoset.
    num_actions : (nI,) int64
        ``|A(I)|``.
    mask : (nI, A) bool
        Legal action columns.
    infoset_keys : list of str
        The information-state string of each infoset.
    infoset_actions : list of list of int
        Native action ids of each infoset's columns.
    """

    name: str
    parent: np.ndarray
    parent_action: np.ndarray
    kind: np.ndarray
    infoset: np.ndarray
    chance_prob: np.ndarray
    utility: np.ndarray
    children: np.ndarray
    levels: list[np.ndarray]
    infoset_player: np.ndarray
    infoset_depth: np.ndarray
    num_actions: np.ndarray
    mask: np.ndarray
    infoset_keys: list[str]
    infoset_actions: list[list[int]]
    _cache: dict[Any, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def num_histories(self) -> int:
        return int(self.parent.shape[0])

    @property
    def num_infosets(self) -> int:
        return int(self.mask.shape[0])

    @property
    def max_actions(self) -> int:
        return int(self.mask.shape[1])

    @property
    def depth(self) -> int:
        """Number of depth levels (root is depth 0)."""
        return len(self.levels)

    def infoset_index(self, key: str) -> int:
        """Row of the infoset with this information-state string.

        Raises
        ------
        TypeError
            ``key`` is not a str.
        ValueError
            No infoset has this key (see :attr:`infoset_keys`).
        """
        if not isinstance(key, str):
            raise TypeError(f"key must be an information-state string, got {type(key).__name__}")
        try:
            return self.infoset_keys.index(key)
        except ValueError:
            raise ValueError(
                f"key {key!r} is not an information-state string of {self.name!r} (see Game.infoset_keys)"
            ) from None

    def __repr__(self) -> str:
        return (
            f"Game({self.name!r}, histories={self.num_histories}, infosets={self.num_infosets}, A={self.max_actions})"
        )

    def arrays(self, backend: Any = "numpy") -> dict[str, Any]:
        """Derived arrays for the solver passes, cached per backend.

        Parameters
        ----------
        backend : "numpy" or torch.device
            ``"numpy"`` gives numpy arrays; a torch device gives tensors on that device.
        """
        key = str(backend)
        if key in self._cache:
            return self._cache[key]
        a = self.max_actions
        dec = np.flatnonzero(self.kind <= 1)
        dec_inf = self.infoset[dec]
        dec_children = self.children[dec, :a]
        dec_mask = self.mask[dec_inf]
        safe_children = np.where(dec_mask, dec_children, 0)
        nonroot = np.arange(1, self.num_histories)
        pk = self.kind[self.parent[nonroot]]
        edge_col = np.where(pk <= 1, self.infoset[self.parent[nonroot]] * a + self.parent_action[nonroot], 0)
        edge_col = np.concatenate([[0], edge_col])
        # Chance probabilities laid out like children, so the sampler draws from one matrix.
        c = self.children.shape[1]
        chance_matrix = np.zeros((self.num_histories, c))
        chance_matrix[self.parent[nonroot][pk == CHANCE], self.parent_action[nonroot][pk == CHANCE]] = self.chance_prob[
            nonroot
        ][pk == CHANCE]
        levels = [lv for lv in self.levels]
        level_dec = [lv[self.kind[lv] <= 1] for lv in levels]
        # Position of each decision history inside `dec`, so per-level passes index dec-sized arrays.
        dec_pos = np.full(self.num_histories, -1, dtype=np.int64)
        dec_pos[dec] = np.arange(dec.shape[0])
        out: dict[str, Any] = {
            "dec": dec,
            "dec_inf": dec_inf,
            "dec_player": self.kind[dec].astype(np.int64),
            "dec_children": safe_children,
            "dec_mask": dec_mask,
            "dec_flat": (dec_inf[:, None] * a + np.arange(a)[None, :]),
            "nonroot": nonroot,
            "nonroot_parent": self.parent[nonroot],
            "parent_kind": np.concatenate([[-1], pk]).astype(np.int64),
            "edge_col": edge_col,
            "chance_edge": np.concatenate([[1.0], np.where(pk == CHANCE, self.chance_prob[nonroot], 1.0)]),
            "levels": levels,
            "level_dec_pos": [dec_pos[lv] for lv in level_dec],
            "level_chance": [lv[self.kind[lv] == CHANCE] for lv in levels],
            "level_dec_player": [self.kind[lv].astype(np.int64) for lv in level_dec],
            "level_parent": [self.parent[lv] for lv in levels],
            "utility": self.utility,
            "kind": self.kind.astype(np.int64),
            "infoset": self.infoset,
            "children": self.children,
            "chance_matrix": chance_matrix,
            "mask": self.mask,
            "num_actions": self.num_actions,
            "infoset_player": self.infoset_player,
            "infoset_depth": self.infoset_depth,
        }
        if key != "numpy":
            import torch

            def conv(v: Any) -> Any:
                if isinstance(v, list):
                    return [conv(x) for x in v]
                return torch.as_tensor(v, device=backend)

            out = {k: conv(v) for k, v in out.items()}
        self._cache[key] = out
        return out


def check_game(game: Any, name: str = "game") -> Game:
    """Return ``game`` if it is a :class:`Game`, else a ``TypeError`` naming ``name``.

    A ``pyspiel.Game`` gets a hint to convert it with :func:`from_openspiel` (both classes are
    called ``Game``, so the bare type name would not tell them apart).
    """
    if not isinstance(game, Game):
        kind = type(game)
        got = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        hint = "; convert it with iclr25.rl.efg_pg.games.from_openspiel(game)" if kind.__module__ == "pyspiel" else ""
        raise TypeError(f"{name} must be an iclr25.rl.efg_pg Game, got {got}{hint}")
    return game


def build_game(root: GameState, name: str = "game") -> Game:
    """Walk a game tree from ``root`` and return its array form.

    Parameters
    ----------
    root : GameState
        Initial state with OpenSpiel's state interface.
    name : str
        Name recorded on the game.

    Raises
    ------
    ValueError
        If the game is not two-player zero-sum, or an infoset mixes histories of different depth
        or different legal actions (the level-synchronous passes need both).
    """
    nodes: list[dict[str, Any]] = []
    infosets: dict[str, int] = {}
    inf_player: list[int] = []
    inf_actions: list[list[int]] = []
    inf_depth: list[int] = []
    stack: list[tuple[Any, int, int, float, int]] = [(root, -1, 0, 1.0, 0)]
    # Depth-first with an explicit stack: a recursive walk would hit Python's limit on deep games.
    while stack:
        state, parent, col, prob, depth = stack.pop()
        idx = len(nodes)
        node: dict[str, Any] = {"parent": parent, "col": col, "prob": prob, "depth": depth, "children": []}
        nodes.append(node)
        if parent >= 0:
            nodes[parent]["children"].append((col, idx))
        if state.is_terminal():
            r = [float(x) for x in state.returns()]
            if len(r) != 2 or abs(r[0] + r[1]) > 1e-9:
                raise ValueError(f"game must be two-player zero-sum, but a terminal has returns {r}")
            node.update(kind=TERMINAL, infoset=-1, utility=r[0])
            continue
        if state.is_chance_node():
            node.update(kind=CHANCE, infoset=-1, utility=0.0)
            outcomes = list(state.chance_outcomes())
            for k, (action, p) in reversed(list(enumerate(outcomes))):
                stack.append((state.child(action), idx, k, float(p), depth + 1))
            continue
        player = int(state.current_player())
        if player not in (0, 1):
            raise ValueError(f"game must be two-player (players 0 and 1), got current_player {player}")
        key = state.information_state_string()
        legal = [int(a) for a in state.legal_actions()]
        if key not in infosets:
            infosets[key] = len(inf_player)
            inf_player.append(player)
            inf_actions.append(legal)
            inf_depth.append(depth)
        i = infosets[key]
        if inf_actions[i] != legal or inf_depth[i] != depth or inf_player[i] != player:
            raise ValueError(f"infoset {key!r} mixes histories with different actions, depths or players")
        node.update(kind=player, infoset=i, utility=0.0)
        for k in reversed(range(len(legal))):
            stack.append((state.child(legal[k]), idx, k, 1.0, depth + 1))

    # Renumber by depth (stable) so each level is a contiguous block and the root is 0.
    depths = np.array([n["depth"] for n in nodes])
    order = np.argsort(depths, kind="stable")
    new_id = np.empty_like(order)
    new_id[order] = np.arange(len(nodes))
    h = len(nodes)
    fan = max((len(n["children"]) for n in nodes), default=1)
    parent = np.full(h, -1, dtype=np.int64)
    pcol = np.zeros(h, dtype=np.int64)
    kind = np.zeros(h, dtype=np.int8)
    infoset = np.full(h, -1, dtype=np.int64)
    chance_prob = np.ones(h)
    utility = np.zeros(h)
    children = np.full((h, max(fan, 1)), -1, dtype=np.int64)
    for old, n in enumerate(nodes):
        i = new_id[old]
        parent[i] = new_id[n["parent"]] if n["parent"] >= 0 else -1
        pcol[i] = n["col"]
        kind[i] = n["kind"]
        infoset[i] = n["infoset"]
        utility[i] = n["utility"]
        if n["parent"] >= 0 and nodes[n["parent"]]["kind"] == CHANCE:
            chance_prob[i] = n["prob"]
        for col, child in n["children"]:
            children[i, col] = new_id[child]
    levels = [np.flatnonzero(depths[order] == d) for d in range(int(depths.max()) + 1)]
    n_inf = len(inf_player)
    num_actions = np.array([len(a) for a in inf_actions], dtype=np.int64)
    a_max = int(num_actions.max()) if n_inf else 1
    mask = np.arange(a_max)[None, :] < num_actions[:, None]
    keys = [""] * n_inf
    for k, i in infosets.items():
        keys[i] = k
    game = Game(
        name=name,
        parent=parent,
        parent_action=pcol,
        kind=kind,
        infoset=infoset,
        chance_prob=chance_prob,
        utility=utility,
        children=children,
        levels=levels,
        infoset_player=np.array(inf_player, dtype=np.int64),
        infoset_depth=np.array(inf_depth, dtype=np.int64),
        num_actions=num_actions,
        mask=mask,
        infoset_keys=keys,
        infoset_actions=inf_actions,
    )
    logger.debug("built %r", game)
    return game


# --------------------------------------------------------------------------- Kuhn poker


class _KuhnState:
    """Kuhn poker with OpenSpiel's rules, action ids (0 pass, 1 bet) and infoset strings."""

    def __init__(self, cards: tuple[int, ...] = (), bets: str = "") -> None:
        self.cards = cards
        self.bets = bets

    def is_chance_node(self) -> bool:
        return len(self.cards) < 2

    def chance_outcomes(self) -> list[tuple[int, float]]:
        left = [c for c in range(3) if c not in self.cards]
        return [(c, 1.0 / len(left)) for c in left]

    def is_terminal(self) -> bool:
        return self.bets in ("pp", "bp", "bb", "pbp", "pbb")

    def returns(self) -> list[float]:
        b = self.bets
        if b in ("bp", "pbp"):  # the last mover folded to a bet: the bettor takes the ante
            winner = 0 if b == "bp" else 1
            return [1.0, -1.0] if winner == 0 else [-1.0, 1.0]
        stake = 2.0 if "b" in b else 1.0
        return [stake, -stake] if self.cards[0] > self.cards[1] else [-stake, stake]

    def current_player(self) -> int:
        return len(self.bets) % 2

    def legal_actions(self) -> list[int]:
        return [0, 1]

    def information_state_string(self) -> str:
        return f"{self.cards[self.current_player()]}{self.bets}"

    def child(self, action: int) -> _KuhnState:
        if self.is_chance_node():
            return _KuhnState((*self.cards, action), self.bets)
        return _KuhnState(self.cards, self.bets + "pb"[action])


def kuhn_poker() -> Game:
    """Three-card Kuhn poker (12 infosets, 30 terminals), as in OpenSpiel.

    Returns
    -------
    Game
        Infoset keys are the card (0=J, 1=Q, 2=K) followed by the betting (``p`` pass, ``b`` bet).
    """
    return build_game(_KuhnState(), name="kuhn_poker")


# --------------------------------------------------------------------------- Leduc poker

_FOLD, _CALL, _RAISE = 0, 1, 2


class _LeducState:
    """Leduc hold'em with OpenSpiel's rules: 6 cards (3 ranks x 2 suits), antes of 1, raises of
    2 then 4, at most two raises per round, a public card after round one."""

    def __init__(self, iso: bool) -> None:
        self.iso = iso
        self.cards: tuple[int, ...] = ()  # private P0, private P1, public
        self.rounds: list[str] = [""]
        self.contrib = [1, 1]
        self.folded = -1

    def _copy(self) -> _LeducState:
        s = _LeducState(self.iso)
        s.cards, s.rounds, s.contrib, s.folded = self.cards, list(self.rounds), list(self.contrib), self.folded
        return s

    def _round_over(self) -> bool:
        seq = self.rounds[-1]
        return seq.endswith("c") and len(seq) >= 2

    def is_chance_node(self) -> bool:
        if self.folded >= 0:
            return False
        return len(self.cards) < 2 or (len(self.cards) == 2 and len(self.rounds) == 1 and self._round_over())

    def chance_outcomes(self) -> list[tuple[int, float]]:
        left = [c for c in range(6) if c not in self.cards]
        return [(c, 1.0 / len(left)) for c in left]

    def is_terminal(self) -> bool:
        return self.folded >= 0 or (len(self.rounds) == 2 and self._round_over())

    def returns(self) -> list[float]:
        if self.folded >= 0:
            loser = self.folded
        else:
            ranks = [c // 2 for c in self.cards]
            pub = ranks[2]
            # A pair with the public card beats any unpaired hand; otherwise the higher rank wins.
            score = [(100 if ranks[p] == pub else 0) + ranks[p] for p in (0, 1)]
            if score[0] == score[1]:
                return [0.0, 0.0]
            loser = 0 if score[0] < score[1] else 1
        pot = float(self.contrib[loser])
        return [-pot, pot] if loser == 0 else [pot, -pot]

    def current_player(self) -> int:
        return len(self.rounds[-1]) % 2

    def legal_actions(self) -> list[int]:
        p = self.current_player()
        acts = []
        if self.contrib[1 - p] > self.contrib[p]:
            acts.append(_FOLD)
        acts.append(_CALL)
        if self.rounds[-1].count("r") < 2:
            acts.append(_RAISE)
        return acts

    def information_state_string(self) -> str:
        p = self.current_player()
        card = self.cards[p] // 2 if self.iso else self.cards[p]
        pub = "" if len(self.cards) < 3 else (self.cards[2] // 2 if self.iso else self.cards[2])
        return f"p{p} c{card} pub{pub} {'/'.join(self.rounds)}"

    def child(self, action: int) -> _LeducState:
        s = self._copy()
        if self.is_chance_node():
            s.cards = (*self.cards, action)
            if len(s.cards) == 3:
                s.rounds.append("")
            return s
        p = self.current_player()
        if action == _FOLD:
            s.folded = p
            s.rounds[-1] += "f"
        elif action == _CALL:
            s.contrib[p] = s.contrib[1 - p]
            s.rounds[-1] += "c"
        else:
            size = 2 if len(self.rounds) == 1 else 4
            s.contrib[p] = s.contrib[1 - p] + size
            s.rounds[-1] += "r"
        return s


def leduc_poker(suit_isomorphic: bool = False) -> Game:
    """Leduc hold'em with OpenSpiel's rules (936 infosets; 288 with ``suit_isomorphic=True``).

    Parameters
    ----------
    suit_isomorphic : bool
        Key infosets by card rank instead of card, merging suit-symmetric infosets. Suits never
        affect payoffs, so the merge is lossless: values and equilibria are unchanged. Keep the
        default for comparisons with OpenSpiel policies.
    """
    if not isinstance(suit_isomorphic, bool):
        raise TypeError(f"suit_isomorphic must be a bool, got {type(suit_isomorphic).__name__}")
    name = "leduc_poker_iso" if suit_isomorphic else "leduc_poker"
    return build_game(_LeducState(suit_isomorphic), name=name)


def from_openspiel(game: Any) -> Game:
    """Build a :class:`Game` from a ``pyspiel.Game`` (needs ``iclr25-rl[openspiel]``).

    Parameters
    ----------
    game : pyspiel.Game
        A two-player zero-sum, perfect-recall game with information-state strings.

    Raises
    ------
    ValueError
        If the game is not two-player, not zero-sum, not sequential (wrap a simultaneous-move game
        with ``pyspiel.convert_to_turn_based``) or has no information-state strings (checked from
        its type before the walk).
    """
    try:
        import pyspiel
    except ImportError as err:  # pragma: no cover - depends on the optional extra
        raise ImportError("from_openspiel needs open_spiel: pip install 'iclr25-rl[openspiel]'") from err
    if not isinstance(game, pyspiel.Game):
        raise TypeError(f"game must be a pyspiel.Game, got {type(game).__name__}")
    if game.num_players() != 2:
        raise ValueError(f"game must be two-player, got num_players={game.num_players()}")
    if game.get_type().utility != pyspiel.GameType.Utility.ZERO_SUM:
        raise ValueError(f"game must be zero-sum, got utility={game.get_type().utility}")
    if game.get_type().dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        raise ValueError(
            f"game must have sequential dynamics, got {game.get_type().dynamics}; "
            "wrap a simultaneous-move game with pyspiel.convert_to_turn_based(game)"
        )
    if not game.get_type().provides_information_state_string:
        raise ValueError("game must provide information-state strings (provides_information_state_string)")
    return build_game(game.new_initial_state(), name=str(game))
