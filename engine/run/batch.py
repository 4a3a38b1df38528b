"""What stepping several images at once needs: model pixels made off the main thread, the batch a
device gets by default, and telling an out-of-memory error from other failures of a step.

:func:`model_pixels` is the CPU half of :meth:`engine.run.session.Session.preprocess` (decode to
RGB, resize to the model's input size), pure and thread-safe, so the stream loop's readers run it
beside the model (:mod:`engine.run.reading`); the session turns a stack of them into the model's
input on its device in one transfer (uint8, a quarter of the float bytes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from engine.io.images import read_image, to_rgb

ImageInput = Image.Image | np.ndarray | str | Path

#: Images per step by default, per device type (``f2tta run --batch``, ``benchmarks/slide_speed.py``):
#: on the CPU a batch amortises the per-step overhead of a small model (``docs/benchmark.md``); on
#: an accelerator it fills the device. A method's :attr:`~engine.methods.base.TTAMethod.max_batch`
#: caps it.
DEFAULT_BATCH = {"cpu": 16, "cuda": 64, "mps": 16}
#: The largest batch ``f2tta run`` takes: three batches are read ahead, and memory must stay small.
MAX_BATCH = 1024


def model_pixels(image: ImageInput, size: int) -> np.ndarray:
    """``image`` as the model sees it before normalisation: RGB uint8 ``(size, size, 3)``.

    Paths are read with :func:`engine.io.images.read_image`; other modes become RGB; the image is
    resized bilinearly when it is not ``size`` x ``size``. An array that is already that is
    returned as it is.

    Raises:
        ValueError: an array that is not ``(H, W)``, ``(H, W, 3)`` or ``(H, W, 4)`` uint8.
    """
    if isinstance(image, np.ndarray):
        arr = image
        if arr.ndim == 3 and arr.shape == (size, size, 3) and arr.dtype == np.uint8:
            return arr
        if arr.ndim == 2:
            arr = np.stack([arr] * 3, axis=-1)
        if arr.ndim != 3 or arr.shape[2] not in (3, 4):
            raise ValueError(f"expected an HxWx3 image array, got shape {arr.shape}")
        if arr.dtype != np.uint8:
            raise ValueError(f"expected a uint8 image array, got {arr.dtype}")
        image = Image.fromarray(np.ascontiguousarray(arr[..., :3]))
    elif isinstance(image, (str, Path)):
        image = read_image(image)
    img = to_rgb(image) if image.mode != "RGB" else image
    if img.size != (size, size):
        img = img.resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(img, dtype=np.uint8)


def default_batch(device: torch.device, max_batch: int | None) -> int:
    """Images per step for ``device``, within a method's ``max_batch`` (None: no limit)."""
    batch = DEFAULT_BATCH.get(device.type, 1)
    return batch if max_batch is None else max(1, min(batch, max_batch))


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether a failed step ran out of memory (CUDA's error, MPS's, or the CPU allocator's)."""
    if isinstance(exc, MemoryError | torch.cuda.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
