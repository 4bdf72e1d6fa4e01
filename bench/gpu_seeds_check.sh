#!/usr/bin/env bash
# One device command (carry: device_carry, from `python bench/device_pack.py --tasks sst2 cola`), issue 31:
# 1. the SST-2 gap question: fused and unfused grids of bench/experiments/sst2-seeds6-13-minilm.toml (280 runs
#    each, seeds 6-13: eight dropout-stream pairs the blog grid's seeds 1-5 did not have), both under MPS with 10
#    workers, one after the other on one machine;
# 2. RoBERTa-base (random weights of its configuration, bench/random_roberta.py, built on the CPU while the grids
#    run) fused and unfused on one sst2 cell, with FLOP/s and the share of the bf16 matmul peak measured there.
# Each part has its own time limit, and its files are packed into one archive as soon as it ends, so that what
# finished comes back (a call returns at most 8 files).
#   bash bench/gpu_seeds_check.sh [FUSED_SECONDS] [UNFUSED_SECONDS] [ROBERTA_SECONDS] [ROBERTA_CELLS]
set -o pipefail
source device_carry/setup.sh || exit 1
python3 bench/random_roberta.py /tmp/roberta-base-random >/tmp/roberta-build.log 2>&1 &
build=$!
study=bench/experiments/sst2-seeds6-13-minilm.toml
STUDY=$study GRID_SECONDS=${1:-180} bash bench/gpu_fused_grid.sh 10 auto mps
(cd "$OUT" && tar czf fused.tgz --remove-files ./*-10-auto-mps*)
STUDY=$study GRID_SECONDS=${2:-230} bash bench/gpu_fused_grid.sh 10 off mps
(cd "$OUT" && tar czf unfused.tgz --remove-files ./*-10-off-mps*)
wait "$build" || { cat /tmp/roberta-build.log; exit 1; }
tail -1 /tmp/roberta-build.log
timeout "${3:-100}" python3 bench/fused_speed.py --device cuda --precision bf16 --seeds 5 \
    --model /tmp/roberta-base-random --cells "${4:-sst2:0:200}" --out "$OUT/roberta.json" >"$OUT/roberta.txt" 2>&1
echo "roberta exit $?"
tail -8 "$OUT/roberta.txt"
