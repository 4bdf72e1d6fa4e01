#!/usr/bin/env bash
# The whole MiniLM blog grid (study/blog2020-minilm.toml, 350 runs) on a lent GPU with fused seeds, as one device
# command (carry: device_carry, made by bench/device_pack.py). Writes under $OUT: the run's log, nvidia-smi's
# utilisation and memory every second, the exported results and per-item predictions.
#   bash bench/gpu_fused_grid.sh [WORKERS] [FUSE] [mps]   # defaults: 10 workers (as the unfused 430.6 s run), fuse auto
# With "mps", NVIDIA's Multi-Process Service runs for the grid: the workers' kernels then share the GPU's SMs at
# once instead of taking turns (time-slicing between processes). STUDY (default blog2020-minilm: a packaged name or
# a spec path) picks the grid; GRID_SECONDS, if set, stops the run after as many seconds and still exports what
# finished (the log then says "exit 124").
set -o pipefail
workers=${1:-10}
fuse=${2:-auto}
mps=${3:-}
source device_carry/setup.sh || exit 1
if [ "$mps" = mps ]; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d || exit 1
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, transformers, optuna; print('torch', torch.__version__, 'transformers', transformers.__version__, 'optuna', optuna.__version__)"
nproc
study=${STUDY:-blog2020-minilm}
tag=$(basename "$study" .toml)
name=$workers-$fuse${mps:+-$mps}
[ "$tag" = blog2020-minilm ] || name=$tag-$name
limit=(); [ -n "${GRID_SECONDS:-}" ] && limit=(timeout "$GRID_SECONDS")
db=/tmp/grid-$name.db
rm -f "$db"
rm -rf "$db.artifacts"
nvidia-smi dmon -s um -d 1 >"$OUT/dmon-$name.txt" 2>&1 &
monitor=$!
started=$(date +%s.%N)
PYTHONUNBUFFERED=1 "${limit[@]}" python3 -m freezestats run --study "$study" --storage "sqlite:///$db" --workers "$workers" \
    --fuse "$fuse" --no-progress >"$OUT/grid-$name.log" 2>&1
status=$?
ended=$(date +%s.%N)
kill "$monitor"
tail -15 "$OUT/grid-$name.log"
python3 -c "print(f'grid wall: {$ended - $started:.1f} s, exit $status, workers $workers, fuse $fuse, $name')" |
    tee -a "$OUT/grid-$name.log"
python3 -m freezestats export --storage "sqlite:///$db" -o "$OUT/grid-$name.csv" \
    --predictions "$OUT/grid-$name-predictions.parquet" | tail -2
