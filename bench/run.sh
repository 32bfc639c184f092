#!/usr/bin/env bash
# Entry script of the device bundle (cargo xtask device-bundle): on the GPU machine, run
# the sm90 tests and the torch cross-check (bin/torch_check + torch_check.py), then our
# benches and the torch peers on the same shapes in the same run, then print a side-by-side
# table. Logs go to $OUT (default ./out).
set -u
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/out}
if [ -f bundle.txz ] && [ ! -d tests ]; then
  # Unpack the bundle next to a scratch copy (with the wheel, if any) and run from there.
  work=$(mktemp -d)
  tar -xJf bundle.txz -C "$work" && cp "$0" "$work/run.sh" && { cp ./*.whl "$work/" 2>/dev/null || true; }
  OUT="$OUT" exec bash "$work/run.sh"
fi
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# GPU tests (and the torch check) fail rather than skip when they find no GPU or no sm90 build.
export FLYDSL_REQUIRE_GPU=1
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

pass=0; fail=0
for t in tests/*; do
  if [ "${SKIP_TESTS:-0}" = 1 ]; then break; fi
  echo "=== $t" >> "$OUT/tests.log"
  if FLYDSL_BACKEND=cuda "./$t" --test-threads=4 >> "$OUT/tests.log" 2>&1; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED: $t"; fi
done
grep -E "^(=== |test result)" "$OUT/tests.log" | paste - - | awk '{print $2, $5, $6, $7, $8}'

# Every fly-norm variant against torch on the same inputs (counted as one test binary;
# SKIP_TORCH_CHECK=1 skips it). The data goes to a scratch folder, the log to $OUT.
if [ "${SKIP_TORCH_CHECK:-0}" != 1 ]; then
  tc=$(mktemp -d)
  { FLYDSL_BACKEND=cuda timeout 120 ./bin/torch_check --out "$tc" &&
    timeout 180 python3 torch_check.py "$tc"; } > "$OUT/torch_check.log" 2>&1
  rc=$?
  rm -rf "$tc"
  echo "torch check: rc=$rc; $(tail -n 1 "$OUT/torch_check.log")"
  if [ $rc = 0 ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED: torch_check (see torch_check.log)"; fi
fi
# The flydsl Python package against torch in one process (py_check.py; SKIP_PY=1 skips it;
# a bundle built without --wheel has none, and this says so).
if [ "${SKIP_PY:-0}" != 1 ]; then
  whl=$(ls ./*.whl 2>/dev/null | head -n 1)
  if [ -z "$whl" ]; then
    echo "py_check: no wheel in the bundle (cargo xtask wheel --zig --out DIR, then device-bundle --wheel DIR)"
  else
    site=$(mktemp -d)
    if python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$whl" > "$OUT/py_check.log" 2>&1 &&
      PYTHONPATH="$site" timeout 300 python3 py_check.py >> "$OUT/py_check.log" 2>&1; then
      pass=$((pass+1))
    else
      fail=$((fail+1)); echo "FAILED: py_check (see py_check.log)"
    fi
    echo "py_check: $(grep -E '^py_check: [0-9]+ passed' "$OUT/py_check.log" | tail -n 1)"
  fi
fi
echo "test binaries: $pass passed, $fail failed"

# SKIP_BENCH=1 stops here (tests only).
if [ "${SKIP_BENCH:-0}" = 1 ]; then exit 0; fi

# The Hopper GEMM proof against torch.matmul on the same inputs (SKIP_GEMM=1 skips it;
# GEMM_ONLY=1 stops after it).
if [ "${SKIP_GEMM:-0}" != 1 ]; then
  OUT="$OUT" timeout 600 ./bin/gemm_bench 2>&1 | tee "$OUT/gemm.log"
  OUT="$OUT" timeout 600 python3 peers_gemm.py 2>&1 | tee -a "$OUT/gemm.log"
fi
if [ "${GEMM_ONLY:-0}" = 1 ]; then exit 0; fi
# fly-attn (its portable and its Hopper kernel, through the public API) against torch SDPA
# (flash and cuDNN backends, each forced) on the same inputs (SKIP_ATTN=1 skips it;
# ATTN_ONLY=1 stops after it, with SKIP_GEMM=1 it is the only bench; ATTN_BENCH_QUICK=1 runs
# one shape; ATTN_BENCH_KERNEL=portable|hopper times one kernel).
if [ "${SKIP_ATTN:-0}" != 1 ]; then
  OUT="$OUT" timeout 600 ./bin/attn_bench 2>&1 | tee "$OUT/attn.log"
  OUT="$OUT" timeout 600 python3 peers_attn.py 2>&1 | tee -a "$OUT/attn.log"
fi
if [ "${ATTN_ONLY:-0}" = 1 ]; then exit 0; fi

# fly-comm on this machine's GPUs (SKIP_COMM=1 skips it): with one GPU, two ranks emulated
# on it (no NCCL); with two or more, NCCL too, and the torch.distributed NCCL peer.
if [ "${SKIP_COMM:-0}" != 1 ]; then
  # NCCL as torch ships it (fly-comm loads it at run time).
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib", "libnccl.so.2"))' 2>/dev/null)
  if [ -z "${FLY_COMM_NCCL_LIB:-}" ] && [ -n "$nccl" ]; then export FLY_COMM_NCCL_LIB=$nccl; fi
  OUT="$OUT" timeout 300 ./bin/allreduce_bench --max-mib 256 2>&1 | tee "$OUT/allreduce.log"
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    OUT="$OUT" timeout 300 python3 peers_allreduce.py --ws 2 --max-mib 256 2>&1 | tee -a "$OUT/allreduce.log"
  fi
fi

# Every forward and backward plan of fly-norm at the bench shapes (a few minutes; SKIP_SWEEP=1
# skips them).
if [ "${SKIP_SWEEP:-0}" != 1 ]; then
  timeout 150 ./bin/fwd_sweep 2>&1 | tee "$OUT/sweep.log"
  # Every backward plan under both weight-gradient strategies (--budget 100 s).
  timeout 240 ./bin/bwd_sweep 2>&1 | tee "$OUT/bwd_sweep.log"
fi
# Host cost of dropping a buffer that queued kernels use (bench/rt-drop-cost.md).
./bin/drop_cost 2>&1 | tee "$OUT/drop_cost.log"
./bin/launch_overhead 2>&1 | tee "$OUT/launch.log"
# BENCH_ARGS (e.g. "--shape 3000x5000 --dtype bf16") goes to both our bench and the peers.
./bin/xtask bench --backend cuda --family "${BENCH_FAMILY:-all}" ${BENCH_ARGS:-} --json "$OUT/ours.json" 2>&1 | tee "$OUT/bench.log"
# The same bench with the keep-in-L2 hint off everywhere (A/B of the hint; SKIP_AB=1 skips).
if [ "${SKIP_AB:-0}" != 1 ]; then
  FLYDSL_KEEP_L2=0 ./bin/xtask bench --backend cuda --family "${BENCH_FAMILY:-all}" ${BENCH_ARGS:-} --json "$OUT/ours_no_keep_l2.json" > "$OUT/bench_no_keep_l2.log" 2>&1
fi
python3 peers.py ${BENCH_ARGS:-} 2>&1 | tee -a "$OUT/bench.log"
python3 compare.py "$OUT"
