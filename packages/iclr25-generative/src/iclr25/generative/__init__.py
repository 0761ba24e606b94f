"""iclr25.generative — diffusion-model papers on a shared small diffusion core.

Each paper is a subpackage (``iclr25.generative.<slug>``) imported on first use, so importing the
domain stays cheap. Paper cards (claims, status) ship in ``cards/``; see ``iclr25 list``.
"""

from iclr25.core.lazy import attach

__version__ = "0.1.0"

# Paper subpackages that exist in this release (planned papers have a card only).
__getattr__, __dir__, __all__ = attach(__name__, ["diffusion", "topodiffusion", "tcm"])
