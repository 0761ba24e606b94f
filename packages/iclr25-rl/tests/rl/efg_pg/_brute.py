"""Independent recursive evaluators over the games' state objects (no level arrays)."""

from __future__ import annotations

import math
from collections import defaultdict


def brute_values(root, game, probs, tau):
    """cf, r, own by plain recursion over states; keys map to the game's rows by infoset string."""
    cf = defaultdict(float)
    r = defaultdict(float)
    own = {}

    def prob_of(key):
        i = game.infoset_index(key)
        return i, {a: probs[i, j] for j, a in enumerate(game.infoset_actions[i])}

    def val(state, rc, r0, r1):
        if state.is_terminal():
            return state.returns()[0]
        if state.is_chance_node():
            return sum(p * val(state.child(a), rc * p, r0, r1) for a, p in state.chance_outcomes())
        p = state.current_player()
        i, pr = prob_of(state.information_state_string())
        sgn = 1.0 if p == 0 else -1.0
        r_opp = rc * (r1 if p == 0 else r0)
        total = 0.0
        for j, a in enumerate(game.infoset_actions[i]):
            v = val(state.child(a), rc, r0 * (pr[a] if p == 0 else 1), r1 * (pr[a] if p == 1 else 1))
            cf[i, j] += r_opp * sgn * v
            total += pr[a] * v
        r[i] += r_opp
        own[i] = r0 if p == 0 else r1
        psi = sum(q * math.log(q) for q in pr.values() if q > 0) + math.log(len(pr))
        return total + (-tau * psi if p == 0 else tau * psi)

    root_value = val(root, 1.0, 1.0, 1.0)
    return cf, r, own, root_value
