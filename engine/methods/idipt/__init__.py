"""I-DiPT (Image-level Disentangled Prompt Tuning): the method and its parts.

* :mod:`._method` -- :class:`IDiPT` (the paper's step, the step of a batch of several images
  (``docs/method.md``, "Batches"), the state); :mod:`._config` -- :class:`IDiPTConfig`;
* :mod:`._bank` -- the prompt bank (FIFO of frequency keys and prompts, similarity weights ω);
* :mod:`._graph` -- the two distillation graphs of PGD.

Building blocks I-DiPT shares with the baselines live beside the methods, so no baseline imports
from this package: frequency keys in :mod:`engine.methods.parts.fft` (also VPTTA's memory keys),
uncertainty-oriented masking in :mod:`engine.methods.parts.uom` (also C-MAE's masking) and the losses
in :mod:`engine.methods.parts.losses`; import them from there.
"""

from __future__ import annotations

from engine.methods.idipt._bank import PromptBank
from engine.methods.idipt._graph import PromptGraph
from engine.methods.idipt._method import IDiPT, IDiPTConfig

__all__ = ["IDiPT", "IDiPTConfig", "PromptBank", "PromptGraph"]
