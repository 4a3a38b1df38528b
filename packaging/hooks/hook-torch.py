"""torch: pyinstaller-hooks-contrib's hook, trimmed for a CPU bundle.

With ``F2TTA_TORCH_TARGET=cuda`` this is the stock hook unchanged (all CUDA libraries of the build).
With ``cpu`` (the default) and a CUDA build of torch in the build environment (the Linux wheels on PyPI are
CUDA builds), the NVIDIA wheels are no longer collected whole: only the CUDA libraries that torch's own
libraries link against (DT_NEEDED — the dynamic loader refuses to load ``libtorch_cuda.so`` without them)
are picked up by PyInstaller's binary dependency analysis. The libraries torch only ``dlopen``s on a GPU
(cuDNN's engine libraries, cuSOLVER through ``libtorch_cuda_linalg.so``, CUPTI, NVTX, ...) and triton
(used only by ``torch.compile``) are left out. With a CPU build of torch nothing CUDA is there to trim.
"""

import runpy
from pathlib import Path

_delegate = runpy.run_path(str(Path(__file__).with_name("_delegate.py")))
globals().update(_delegate["stock_hook"]("hook-torch.py"))

hiddenimports = [
    name for name in globals().get("hiddenimports", []) if name != "triton" and not name.startswith("triton.")
]
# torch.compile's code generators import triton lazily and fall back when it is missing.
excludedimports = [*globals().get("excludedimports", []), "triton"]

if _delegate["TORCH_TARGET"] == "cpu":
    hiddenimports = [
        name for name in hiddenimports if not name.startswith(("nvidia", "cuda.", "cuda_")) and name != "cuda"
    ]
    excludedimports += ["nvidia", "cuda", "cuda_bindings", "cuda_pathfinder"]
    # dlopen()ed by torch only for linear algebra on a GPU; it alone pulls in cuSOLVER (~250 MB).
    _GPU_ONLY = ("libtorch_cuda_linalg",)
    binaries = [
        (src, dest) for src, dest in globals().get("binaries", []) if not Path(src).name.startswith(_GPU_ONLY)
    ]
