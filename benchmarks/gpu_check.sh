#!/usr/bin/env bash
# The accelerator checks, as one script (for a machine with a CUDA GPU and the project's Python
# packages): the gpu-marked tests, then the step-cost benchmark on the GPU for ViT-B/16 at 224 px
# and for the demo models' ViT-Tiny at 96 px. Prints everything; exits with the tests' status.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}
export QT_QPA_PLATFORM=offscreen
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
"$PY" -m pytest -q -m gpu tests/test_gpu.py -o addopts="--timeout=600" -p no:cacheprovider
status=$?
"$PY" benchmarks/step_cost.py --device cuda --images 30
"$PY" benchmarks/step_cost.py --device cuda --images 30 --arch vit_tiny_patch16_224 --img-size 96
exit $status
