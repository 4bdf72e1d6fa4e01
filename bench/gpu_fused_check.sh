#!/usr/bin/env bash
# One device command (carry: device_carry, from bench/device_pack.py): the four sst2 n = 100 cells fused and
# unfused side by side (5 seeds each, bf16; the cells where fused SST-2 runs scored 0.5 points below lone ones),
# then the whole MiniLM blog grid fused under MPS (bench/gpu_fused_grid.sh 10 auto mps). Each part has its own
# time limit so that what finished comes back.
#   bash bench/gpu_fused_check.sh [CELL_SECONDS] [GRID_SECONDS]
set -o pipefail
source device_carry/setup.sh || exit 1
tag=${TAG:-check}
timeout "${1:-200}" python3 bench/fused_speed.py --device cuda --precision bf16 --seeds 5 \
    --cells sst2:-1:100,sst2:0:100,sst2:1:100,sst2:2:100 --out "$OUT/fused-sst2-100-$tag.json" \
    >"$OUT/fused-sst2-100-$tag.txt" 2>&1
echo "cells exit $?"
tail -4 "$OUT/fused-sst2-100-$tag.txt"
timeout "${2:-260}" bash bench/gpu_fused_grid.sh 10 auto mps
echo "grid exit $?"
