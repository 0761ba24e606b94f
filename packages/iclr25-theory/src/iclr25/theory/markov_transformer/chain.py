"""Binary first-order Markov sources with closed-form reference losses.

Kernel ``P = [[1-p, p], [q, 1-q]]`` with ``p = P(0 -> 1)`` and ``q = P(1 -> 0)``; stationary law
``pi = (q, p) / (p + q)``. All entropies are in nats.
"""

from __future__ import annotations

import math
import numbers

import torch

from iclr25.core.triton import Backend, BackendOp

from .reference import markov_sample_reference, markov_sample_scan

__all__ = ["MAX_ENUMERATE", "BinaryMarkovChain", "binary_entropy", "markov_sample"]

#: ``enumerate`` refuses longer sequences unless ``allow_large=True`` (2**20 rows).
MAX_ENUMERATE = 20


def binary_entropy(x: float) -> float:
    """Entropy ``-x log x - (1-x) log(1-x)`` of a Bernoulli(x) variable, in nats (0 at x in {0, 1})."""
    if not isinstance(x, (numbers.Real, torch.Tensor)):
        raise TypeError(f"x must be a float in [0, 1], got {type(x).__name__}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x!r}")
    return -sum(v * math.log(v) for v in (x, 1.0 - x) if v > 0.0)


def _check_length(length: object, name: str = "length") -> int:
    if isinstance(length, bool) or not isinstance(length, int):
        raise TypeError(f"{name} must be an int, got {type(length).__name__}")
    if length < 2:
        raise ValueError(f"{name} must be >= 2 (a Markov sequence needs at least one transition), got {length}")
    return length


def _check_uniforms(uniforms: torch.Tensor) -> None:
    if not isinstance(uniforms, torch.Tensor):
        raise TypeError(f"uniforms must be a torch.Tensor, got {type(uniforms).__name__}")
    if uniforms.dim() != 2 or uniforms.shape[1] < 1 or uniforms.shape[0] < 1:
        raise ValueError(f"uniforms must have shape (B, L) with B, L >= 1, got {tuple(uniforms.shape)}")
    if uniforms.dtype != torch.float32:
        raise TypeError(f"uniforms must be float32 (both backends compare in float32), got {uniforms.dtype}")


def _triton_limits(uniforms: torch.Tensor, p: float, q: float, init_one: float) -> list[str]:
    return [] if uniforms.dtype == torch.float32 else [f"needs float32 uniforms, got {uniforms.dtype}"]


def _load_triton(uniforms: torch.Tensor, p: float, q: float, init_one: float) -> torch.Tensor:
    from .kernels import markov_sample_triton

    return markov_sample_triton(uniforms, p, q, init_one)


# "triton" is always listed: without triton installed (or off CUDA) auto skips it, and an explicit
# backend="triton" says why instead of calling it an unknown backend.
# "scan" is plain torch without a Python loop over time: what auto uses off-GPU.
_sample_op = BackendOp(
    "markov_sample",
    [
        Backend("triton", _load_triton, supports=_triton_limits, uses_triton=True),
        Backend("scan", markov_sample_scan),
        Backend("reference", markov_sample_reference),
    ],
)


def markov_sample(uniforms: torch.Tensor, p: float, q: float, init_one: float, backend: str = "auto") -> torch.Tensor:
    """Binary Markov sequences from pre-drawn uniforms (the sampler's hot path).

    Parameters
    ----------
    uniforms:
        ``(B, L)`` float32 tensor of U[0, 1) draws; it is read, never modified.
    p, q:
        Switching probabilities P(0 -> 1) and P(1 -> 0), each in (0, 1).
    init_one:
        Probability that the first symbol is 1, in [0, 1].
    backend:
        ``"auto"`` (Triton on CUDA when installed, else ``"scan"``), ``"scan"`` (loop-free torch),
        ``"reference"`` (torch loop over time, the spec) or ``"triton"``.

    Returns
    -------
    ``(B, L)`` int64 tensor in {0, 1}; both backends return identical sequences for the same uniforms.
    """
    _check_uniforms(uniforms)
    _check_prob(p, "p")
    _check_prob(q, "q")
    if not isinstance(init_one, (numbers.Real, torch.Tensor)):
        raise TypeError(f"init_one must be a float in [0, 1], got {type(init_one).__name__}")
    if not 0.0 <= float(init_one) <= 1.0:
        raise ValueError(f"init_one must be in [0, 1], got {init_one!r}")
    return _sample_op(uniforms, float(p), float(q), float(init_one), backend=backend)


def _check_prob(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float in (0, 1), got {type(value).__name__}")
    value = float(value)
    if not 0.0 < value < 1.0:  # also rejects NaN
        raise ValueError(f"{name} must be in the open interval (0, 1), got {value!r}")
    return value


class BinaryMarkovChain:
    """A binary first-order Markov chain ``P = [[1-p, p], [q, 1-q]]``.

    Parameters
    ----------
    p:
        Switching probability P(x_{n+1}=1 | x_n=0), in (0, 1).
    q:
        Switching probability P(x_{n+1}=0 | x_n=1), in (0, 1).
    init:
        Law of the first symbol: ``"stationary"`` (pi, the official default ``initial='steady'``) or
        ``"uniform"``. The unigram point is a stationary point of the loss only for ``"stationary"``.

    Examples
    --------
    >>> chain = BinaryMarkovChain(0.8, 0.8)
    >>> round(chain.entropy_rate(), 4), round(chain.unigram_entropy(), 4)
    (0.5004, 0.6931)
    """

    def __init__(self, p: float, q: float, init: str = "stationary") -> None:
        self.p = _check_prob(p, "p")
        self.q = _check_prob(q, "q")
        if init not in ("stationary", "uniform"):
            raise ValueError(f"init must be 'stationary' or 'uniform', got {init!r}")
        self.init = init

    def __repr__(self) -> str:
        return f"BinaryMarkovChain(p={self.p!r}, q={self.q!r}, init={self.init!r})"

    @property
    def switching(self) -> float:
        """The switching factor ``p + q`` (1 means i.i.d. symbols)."""
        return self.p + self.q

    def transition_matrix(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """The kernel ``P`` as a ``(2, 2)`` tensor, rows indexed by the current state."""
        return torch.tensor([[1.0 - self.p, self.p], [self.q, 1.0 - self.q]], dtype=dtype)

    def stationary(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Stationary law ``pi = (q, p) / (p + q)`` as a ``(2,)`` tensor."""
        s = self.p + self.q
        return torch.tensor([self.q / s, self.p / s], dtype=dtype)

    def initial(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Law of the first symbol, ``(2,)``: pi or (1/2, 1/2) according to ``init``."""
        if self.init == "uniform":
            return torch.tensor([0.5, 0.5], dtype=dtype)
        return self.stationary(dtype)

    def unigram_entropy(self) -> float:
        """``H(pi)``: the loss of the best context-free (unigram) predictor, in nats."""
        return binary_entropy(self.p / (self.p + self.q))

    def entropy_rate(self) -> float:
        """``H(X_{n+1} | X_n) = pi_0 h(p) + pi_1 h(q)``: the loss of the bigram predictor, in nats."""
        s = self.p + self.q
        return (self.q / s) * binary_entropy(self.p) + (self.p / s) * binary_entropy(self.q)

    def next_one_prob(self, x: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """``P(x_{n+1} = 1 | x_n)`` elementwise: ``p`` where ``x == 0`` and ``1 - q`` where ``x == 1``."""
        x = x.to(dtype)
        return self.p + x * (1.0 - self.q - self.p)

    def sample(
        self,
        batch: int,
        length: int,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        backend: str = "auto",
    ) -> torch.Tensor:
        """Draw ``batch`` independent sequences of ``length`` symbols.

        Parameters
        ----------
        batch:
            Number of sequences B >= 1.
        length:
            Symbols per sequence L >= 2.
        generator:
            Optional ``torch.Generator`` (its device decides where the uniforms are drawn).
        device:
            Device of the result; default: the generator's device, else CPU.
        backend:
            Sampler backend, see :func:`markov_sample`.

        Returns
        -------
        ``(B, L)`` int64 tensor with values in {0, 1}.
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive int, got {batch!r}")
        _check_length(length)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        if device is None:
            device = generator.device if generator is not None else torch.device("cpu")
        uniforms = torch.rand(batch, length, generator=generator, device=device, dtype=torch.float32)
        init_one = float(self.initial()[1])
        return markov_sample(uniforms, self.p, self.q, init_one, backend=backend)

    def enumerate(
        self, length: int, allow_large: bool = False, dtype: torch.dtype = torch.float64
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Every binary sequence of ``length`` symbols with its probability.

        Parameters
        ----------
        length:
            Sequence length L, 2 <= L <= 20 unless ``allow_large``.
        allow_large:
            Permit L > 20 (2**L rows).
        dtype:
            Dtype of the probabilities.

        Returns
        -------
        seqs:
            ``(2**L, L)`` int64, row i is the binary expansion of i (first symbol most significant).
        probs:
            ``(2**L,)`` probabilities under the chain (they sum to 1).
        """
        _check_length(length)
        if length > MAX_ENUMERATE and not allow_large:
            raise ValueError(
                f"length must be <= {MAX_ENUMERATE} for enumerate (2**length rows), got {length}; "
                "pass allow_large=True to enumerate anyway"
            )
        codes = torch.arange(2**length, dtype=torch.long)
        shifts = torch.arange(length - 1, -1, -1, dtype=torch.long)
        seqs = (codes[:, None] >> shifts[None, :]) & 1
        init = self.initial(dtype)
        kernel = self.transition_matrix(dtype)
        probs = init[seqs[:, 0]]
        for t in range(1, length):
            probs = probs * kernel[seqs[:, t - 1], seqs[:, t]]
        return seqs, probs
