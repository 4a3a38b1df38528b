#!/usr/bin/env bash
# The accelerator checks, as one script, for a machine with a CUDA GPU and the project's Python
# packages (openslide's two wheels carried where they are missing); about 8 minutes on one H200,
# estimated (docs/benchmark.md, "GPU, 2026-11-29": 399 s before the look-ahead and the bf16 part):
# - the gpu-marked tests;
# - the step-cost benchmark for ViT-B/16 at 224 px, at batch 1 and 64;
# - the slide benchmark for ViT-B/16 on a generated 20 000-tile slide (uncompressed tiles, quick
#   to write): SourceOnly on 1 024 tiles and the whole slide in bf16 autocast; the default method
#   (its site operating point on: a source reference for the random weights) on 500 tiles, one at
#   a time, batched and with its maps behind, then over the whole slide end to end, its decisions
#   first and its maps behind them (issue 41's GPU targets); last, the default under bf16
#   autocast (--precision bf16, a measurement: "auto" keeps its steps in float32), whose
#   whole-slide line says whether its decisions reach issue 41's 1 000 tiles/s.
# What was measured before and is untouched since is left to slide_speed.py's options, so that
# the checks fit one device loan: float32 and compiled against bf16, idipt one at a time and
# batched (2026-11-27: --precision fp32, --compile, --methods idipt); I-DiPT's prompted decisions
# behind the maps (2026-11-29, 125.5/s: --prompted behind).
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
"$PY" benchmarks/step_cost.py --device cuda --images 20
part "step cost, ViT-B/16, batch 64"
"$PY" benchmarks/step_cost.py --device cuda --images 10 --batch 64
SLIDE="--device cuda --arch vit_base_patch16_224 --img-size 224 --tiles 20000 --compression none"
part "slide speed, ViT-B/16, source in bf16 autocast (the default on CUDA), the whole slide too"
"$PY" benchmarks/slide_speed.py $SLIDE --measure 1024 --methods source
part "slide speed, ViT-B/16, the default (operating point on) on 500 tiles, then its whole slide"
# --reference: a source reference for the random-weights model, so that the default's site
# operating point runs (fits included); the first GPU figures were measured without one (off).
# The whole-slide run is the default's, maps behind its decisions and I-DiPT's prompted decisions
# left on demand, as f2tta run does without review marks: its line gives the tiles per second
# decided end to end and the maps per second behind. On CUDA the next batch's decision pass runs
# ahead on a worker thread (engine/run/ahead.py); the 500-tile maps-behind run is also taken
# taking turns (its line comes first), the comparison within one run.
"$PY" benchmarks/slide_speed.py $SLIDE --measure 500 --methods idipt+ --reference 256
part "slide speed, ViT-B/16, the default in bf16 autocast (measured only: auto runs it in float32)"
# On 2026-11-29 (before the passes looked ahead) the default decided the whole slide at 462
# tiles/s in float32, where the float32 forward alone costs about 0.9 ms a tile at batch 64 (step
# cost above): whether bf16 brings its decisions to the source pass's rate is what this measures
# (docs/benchmark.md, "GPU, 2026-11-29").
"$PY" benchmarks/slide_speed.py $SLIDE --measure 200 --methods idipt+ --reference 256 --precision bf16
part "done"
exit $status
