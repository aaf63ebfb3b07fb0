#!/usr/bin/env bash
# hoop under Slurm, for real: a one-node cluster on this machine (munged, slurmctld and slurmd
# started by this test from a temporary directory, with their own key, configuration and ports,
# and stopped by it on every exit), then
#   srun -n 4 hoop-bench allreduce -c 1   (ranks from SLURM_PROCID..., the store on the step's
#                                          first node at a port derived from the job id)
#   sbatch --wait of a script that trains with srun hoop-train and with hoop-run inside the
#   allocation
# and every result checked. Usage: slurm.sh BIN_DIR
set -euo pipefail
source "$(dirname "$0")/common.sh"
bin=$(realpath "$1")

require_programs "slurmctld slurmd slurm-client munge" munged slurmctld slurmd srun sbatch sinfo squeue scancel
[ "$(id -u)" = 0 ] || skip "the test cluster runs its daemons as root (SlurmUser=root)"

dir=$(mktemp -d /tmp/hoop-slurm.XXXXXX)
pids=()
cleanup() {
  local rc=$?
  # This cluster's jobs first (SLURM_CONF names it), then its daemons.
  if [ -n "${SLURM_CONF:-}" ]; then
    timeout 10 scancel --user=root 2>/dev/null || true
    for _ in $(seq 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    for log in "$dir"/log/*; do echo "--- $log"; tail -n 30 "$log"; done
  fi
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # ctest's timeout: clean up all the same
mkdir -p "$dir"/{munge,state,spool,log}
chmod 700 "$dir/munge"

# munge: a fresh key, its socket in the test's directory.
head -c 1024 /dev/urandom > "$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
munged -F --force --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/pid" --seed-file="$dir/munge/seed" --log-file="$dir/log/munged.log" \
  --num-threads=2 >"$dir/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$dir/munge/socket" ] && break; sleep 0.1; done
[ -S "$dir/munge/socket" ] || skip "munged does not start here: $(tail -n 3 "$dir/log/munged.out")"

# Slurm without cgroups (linuxproc process tracking, no task plugin): containers rarely allow
# them. The node claims 4 CPUs (config_overrides) so that 4 tasks fit on a smaller machine.
# The node's name is where the ranks look for rank 0's store (the step's node list): this
# machine's name when it resolves, else localhost.
node=$(hostname -s)
getent hosts "$node" >/dev/null || node=localhost
cat >"$dir/slurm.conf" <<CONF
ClusterName=hooptest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/linear
SchedulerType=sched/builtin
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=hoop Nodes=ALL Default=YES MaxTime=10 State=UP
CONF
: >"$dir/plugstack.conf"
export SLURM_CONF=$dir/slurm.conf
slurmctld -D -i >"$dir/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N "$node" >"$dir/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 150); do [ "$(sinfo -h -o %t 2>/dev/null)" = idle ] && break; sleep 0.2; done
[ "$(sinfo -h -o %t 2>/dev/null)" = idle ] ||
  skip "the Slurm daemons do not bring the node up here: $(tail -n 3 "$dir/log/slurmd.out")"

export HOOP_TIMEOUT=60
echo "== srun -n 4 hoop-bench allreduce -c 1"
out=$(timeout 120 srun -n 4 "$bin/hoop-bench" allreduce -c 1 -b 1K -e 256K -f 16 -n 5 -w 1 2>&1) ||
  { echo "$out"; fail "srun hoop-bench exited non-zero"; }
echo "$out"
grep -q "| 4 ranks" <<<"$out" || fail "hoop-bench did not run on 4 ranks"
check_bench_table "$out" 3

echo "== sbatch --wait: srun hoop-train, then hoop-run -n 2 -- hoop-train"
cat >"$dir/train.sbatch" <<JOB
#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --output=$dir/train.out
#SBATCH --time=5
set -e
srun $bin/hoop-train --steps 60 --stage 2
$bin/hoop-run -n 2 -- $bin/hoop-train --steps 30 --stage 1
JOB
timeout 180 sbatch --wait "$dir/train.sbatch" || { cat "$dir/train.out"; fail "the batch job failed"; }
cat "$dir/train.out"
[ "$(grep -c "on 2 rank(s)" "$dir/train.out")" = 2 ] || fail "the batch job did not train twice on 2 ranks"
grep -q "^data: digits" "$dir/train.out" || fail "hoop-train did not train on the digits"
accuracy=$(grep -o "final test accuracy [0-9.]*" "$dir/train.out" | awk '{print $4}')
[ "$(wc -l <<<"$accuracy")" = 2 ] || fail "hoop-train printed no final accuracy"
awk '$1 < 0.85 { exit 1 }' <<<"$accuracy" || fail "final accuracy below 0.85: $accuracy"
echo "slurm: srun and sbatch ran hoop; final test accuracies $(echo $accuracy)"
