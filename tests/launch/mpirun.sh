#!/usr/bin/env bash
# hoop under Open MPI's mpirun: the ranks take OMPI_COMM_WORLD_*; rank 0 serves the store on
# loopback at a port derived from mpirun's job id (OMPI_MCA_ess_base_jobid), so that several
# mpiruns on one host do not meet. Then the several-host way: MASTER_ADDR (and MASTER_PORT)
# exported to the ranks with -x. 4 ranks, more than this machine's CPUs (--oversubscribe);
# tests run as root (--allow-run-as-root). Usage: mpirun.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
bin=$(realpath "$1")

require_programs openmpi-bin mpirun
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 4 -x HOOP_TIMEOUT=60)
bench=("$bin/hoop-bench" allreduce -c 1 -b 1K -e 256K -f 16 -n 5 -w 1)

echo "== mpirun -np 4 hoop-bench allreduce -c 1"
out=$(timeout 120 "${mpirun[@]}" -x HOOP_DEBUG=INFO "${bench[@]}" 2>&1) ||
  { echo "$out"; fail "mpirun hoop-bench exited non-zero"; }
grep -v " INFO " <<<"$out"
grep -q "| 4 ranks" <<<"$out" || fail "hoop-bench did not run on 4 ranks"
check_bench_table "$out" 3
[ "$(grep -c "init from openmpi environment" <<<"$out")" = 4 ] ||
  fail "the ranks did not initialise from Open MPI's variables"
grep -q "store 127.0.0.1:29411" <<<"$out" && fail "the store port was not derived from mpirun's job id"

port=$(free_port)
echo "== mpirun -np 4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port hoop-bench allreduce -c 1"
out=$(timeout 120 "${mpirun[@]}" -x HOOP_DEBUG=INFO -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
      "${bench[@]}" 2>&1) || { echo "$out"; fail "mpirun hoop-bench with MASTER_ADDR exited non-zero"; }
check_bench_table "$out" 3
[ "$(grep -c "store 127.0.0.1:$((port + 1))" <<<"$out")" = 4 ] ||
  { echo "$out"; fail "the ranks did not meet at MASTER_ADDR:MASTER_PORT+1"; }
echo "mpirun: 4 ranks, #wrong 0, with the derived port and with MASTER_ADDR"
