#!/usr/bin/env bash
# torchrun's elastic agent with the hoop backend: c10d rendezvous on a free loopback port,
# 1 to 2 nodes (this one), 2 workers, one restart. torch_elastic_train.py's last rank
# SIGKILLs itself mid-training in the first attempt; the agent restarts the group, whose
# fresh TCPStore gives hoop a fresh job id, and the job finishes. Checked: the kill, the
# restart, two job ids, the second attempt's final lines. Usage: torchrun_elastic.sh PYTHONPATH
set -euo pipefail
source "$(dirname "$0")/common.sh"
pythonpath=$(realpath "$1")
python=/usr/bin/python3

"$python" -c "import torch.distributed.run" 2>/dev/null ||
  skip "$python cannot import torch.distributed.run (apt install python3-torch)"
compgen -G "$pythonpath/hoop_torch/_C*.so" >/dev/null ||
  skip "hoop_torch is not built in $pythonpath: torch's headers are not installed (apt install libtorch-dev pybind11-dev)"
logs=$(mktemp -d /tmp/hoop-torchrun.XXXXXX)
trap 'rm -rf "$logs"' EXIT

port=$(free_port)
# --redirects/--tee 1: Debian's torch 1.13 cannot parse their default "0" under Python 3.11
# (docs/TORCH.md). last_call_timeout: once one node joined, wait 1 s (not 30) for a second.
out=$(PYTHONPATH="$pythonpath" OMP_NUM_THREADS=1 HOOP_TIMEOUT=60 HOOP_DEBUG=INFO timeout 240 \
      "$python" -m torch.distributed.run --nnodes 1:2 --nproc_per_node 2 --rdzv_backend c10d \
      --rdzv_endpoint "127.0.0.1:$port" --rdzv_id "hoop-elastic-$port" \
      --rdzv_conf last_call_timeout=1 --max_restarts 1 --monitor_interval 1 \
      --redirects 1 --tee 1 --log_dir "$logs" \
      "$(dirname "$0")/torch_elastic_train.py" 2>&1) || { echo "$out"; fail "torchrun exited non-zero"; }
grep -v " INFO " <<<"$out"

grep -q "attempt 0 rank 1 kills itself" <<<"$out" || fail "the worker did not kill itself"
for rank in 0 1; do
  grep -q "attempt 0 rank $rank finished" <<<"$out" && fail "attempt 0 finished although a worker died"
  grep -q "attempt 1 rank $rank finished 12 steps, loss [0-9.]*, parameters equal on all ranks" \
    <<<"$out" || fail "attempt 1 rank $rank did not finish"
done
# hoop's job id of each attempt, from rank 0's "rank 0 of 2 up (job ID, ...)".
jobs=$(grep -o "rank 0 of 2 up (job [^,]*" <<<"$out" | awk '{print $NF}' | sort -u)
[ "$(wc -l <<<"$jobs")" = 2 ] || fail "expected two hoop job ids (one per attempt), got: $jobs"
echo "torchrun: restarted after the SIGKILL, hoop job ids $(echo $jobs), attempt 1 finished"
