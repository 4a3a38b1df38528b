#!/usr/bin/env bash
# The accelerator checks, as one script (for a machine with a CUDA GPU and the project's Python
# packages), about 7 minutes on one H200 (docs/benchmark.md, "GPU") before issue 41 added the
# default's whole slide to its last part (not yet run on a GPU: 20 000 maps at the 123 maps/s
# measured there before would take about 160 s more):
# the gpu-marked tests; the step-cost benchmark for ViT-B/16 at 224 px at batch 1 and 64; the slide
# benchmark for ViT-B/16 on a generated 20 000-tile slide (uncompressed tiles, quick to write):
# SourceOnly on 2 048 tiles and the whole slide in bf16 autocast, then in float32 and compiled
# (whether bf16 autocast and compiling pay); then the default method (its site operating point on:
# a source reference for the random weights) and idipt on 1 000 tiles of the same slide, and the
# default over the whole slide end to end, its decisions first and its maps behind them.
# Prints everything, with the seconds each part took; exits with the tests' status.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}
export QT_QPA_PLATFORM=offscreen
START=$(date +%s)
part() { echo; echo "== $1 ($(( $(date +%s) - START )) s in)"; }
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
part "gpu tests"
"$PY" -m pytest -q -m gpu tests/test_gpu.py -o addopts="--timeout=600" -p no:cacheprovider
status=$?
part "step cost, ViT-B/16, batch 1"
"$PY" benchmarks/step_cost.py --device cuda --images 30
part "step cost, ViT-B/16, batch 64"
"$PY" benchmarks/step_cost.py --device cuda --images 10 --batch 64
SLIDE="--device cuda --arch vit_base_patch16_224 --img-size 224 --tiles 20000 --compression none"
part "slide speed, ViT-B/16, source in bf16 autocast (the default on CUDA), the whole slide too"
"$PY" benchmarks/slide_speed.py $SLIDE --measure 2048 --methods source
part "slide speed, ViT-B/16, source in float32, then compiled"
"$PY" benchmarks/slide_speed.py $SLIDE --measure 2048 --methods source --precision fp32 --no-whole
"$PY" benchmarks/slide_speed.py $SLIDE --measure 2048 --methods source --compile --no-whole
part "slide speed, ViT-B/16, the default (operating point on; maps inline and behind) and idipt on 1 000 tiles, then the default's whole slide"
# --reference: a source reference for the random-weights model, so that the default's site
# operating point runs (fits included); the first GPU figures were measured without one (off).
# The whole-slide run is the default's (the first method), maps behind its decisions, as f2tta
# run does: its line gives the tiles per second decided end to end and the maps per second behind.
"$PY" benchmarks/slide_speed.py $SLIDE --measure 1000 --methods idipt+,idipt --reference 256
part "slide speed, ViT-B/16, the default with I-DiPT's prompted decisions asked for (a review reaching them)"
# Its maps-behind line is followed by the prompt step's rate behind the maps (docs/method.md,
# "The prompted decision on demand"); without --prompted behind none is made, as f2tta run without marks.
"$PY" benchmarks/slide_speed.py $SLIDE --measure 1000 --methods idipt+ --reference 256 --prompted behind --no-whole
part "done"
exit $status
