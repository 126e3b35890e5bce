#!/bin/bash
# slurm.t - ncf-train and ncf-eval under Slurm: a one-node
# cluster started here (scripts/slurm-cluster.sh: munged, slurmctld,
# slurmd, configuration in build/slurm), srun -n 2 through Slurm's PMIx
# plugin against mpirun -np 2 and one rank (tests/ranks.sh), an sbatch
# script that trains and evaluates, srun without PMIx, a rank killed; the
# daemons stopped at the end, even on failure, leaving nothing running.
#
# Not part of make check (it starts daemons, and make check-slurm first
# installs slurm-wlm and munge); without root or Slurm it is skipped saying
# why, except under make check-slurm (NCF_REQUIRE_SLURM=1): a failure.
. "$(dirname "$0")/../lib.sh"
need() {
	[ "${NCF_REQUIRE_SLURM:-0}" = 1 ] && bail "make check-slurm: $*"
	skip_all "$*"
}
[ "$(id -u)" = 0 ] || need "not root (the Slurm daemons of the test run as root)"
for c in srun sbatch slurmctld slurmd munged; do
	command -v $c >/dev/null 2>&1 || need "no $c (make check-slurm installs slurm-wlm and munge)"
done
command -v mpirun >/dev/null 2>&1 || need "mpirun not installed"
ncf-train -vV 2>/dev/null | grep -q '^features:.* mpi' || need "built without MPI"
CLUSTER=$NCF_ROOT/scripts/slurm-cluster.sh
C=${NCF_SLURM_DIR:-$NCF_ROOT/build/slurm}
cd "$T"
trap 'sh "$CLUSTER" down "$C"; rm -rf "$T"' EXIT
trap 'exit 1' HUP INT TERM
t0=$(date +%s)
sh "$CLUSTER" up "$C" || bail "slurm-cluster.sh up failed (logs in $C)"
diag "cluster up in $(($(date +%s) - t0)) s: $(sh "$CLUSTER" exec "$C" sinfo -h -o '%P %a %D %t %N')"
slurm() { sh "$CLUSTER" exec "$C" "$@"; }
run slurm srun --mpi=list
like "$out" "pmix" "srun offers PMIx, the plugin Debian's Open MPI starts with"
. "$NCF_ROOT/tests/ranks.sh"
MPIRUN="mpirun --allow-run-as-root --oversubscribe"

ncf-prep -q --synthetic ml-latest-small -o data.ncfc
ncf-train -q data.ncfc -o one8.ncfm $RANKS_SHORT
$MPIRUN -np 2 ncf-train -q data.ncfc -o mpi8.ncfm $RANKS_SHORT
# The commands of ncf-train(1) MANY PROCESSES, Slurm.
run slurm timeout 120 srun --mpi=pmix -n 2 ncf-train -v data.ncfc -o srun8.ncfm $RANKS_SHORT
ok $status "srun --mpi=pmix -n 2 ncf-train (status $status)"
like "$err" "rank 0 of 2, local rank 0 of 2 on " "rank 0: rank, size and local rank as under mpirun"
like "$err" "rank 1 of 2, local rank 1 of 2 on " "rank 1: rank, size and local rank as under mpirun"
like "$err" "2 ranks, each taking 1/2 of every global batch" "one job of 2 ranks, not 2 jobs"
ranks_same_params one8.ncfm.last srun8.ncfm.last "2 ranks under srun"
# Two ranks add the same two numbers whichever launcher started them.
cmp -s mpi8.ncfm.last srun8.ncfm.last
ok $? "srun -n 2 writes the bytes of mpirun -np 2"

ncf-train -q data.ncfc -o one.ncfm $RANKS_LONG
run slurm timeout 120 srun -n 2 ncf-train data.ncfc -o srun.ncfm $RANKS_LONG
ok $status "srun -n 2 ncf-train, 2 epochs (MpiDefault=pmix)"
ranks_same_hr one.ncfm.last srun.ncfm.last data.ncfc "2 ranks under srun"

# A batch job: train on 2 tasks, evaluate on 2 and, in the batch script
# itself (no srun: a job of one), on 1.
cat >job.sh <<EOF
#!/bin/sh
#SBATCH --job-name=ncf-test
#SBATCH --ntasks=2
#SBATCH --output=job.out
#SBATCH --time=10
set -e
srun --mpi=pmix ncf-train data.ncfc -o batch.ncfm $RANKS_LONG
srun --mpi=pmix ncf-eval -m batch.ncfm data.ncfc >eval2.tsv
ncf-eval -m batch.ncfm data.ncfc >eval1.tsv
EOF
run slurm timeout 180 sbatch --wait --chdir="$T" job.sh
ok $status "sbatch --wait job.sh: the job succeeds (status $status)"
like "$out" "Submitted batch job [0-9]+" "sbatch names the job"
like job.out "2 ranks, each taking 1/2 of every global batch" "the job trained on 2 ranks"
hr2=$(awk -F'\t' '$1 == "hr@10" { print $2 }' eval2.tsv 2>/dev/null)
hr1=$(awk -F'\t' '$1 == "hr@10" { print $2 }' eval1.tsv 2>/dev/null)
hr=$(ncf-eval -m batch.ncfm data.ncfc 2>/dev/null | awk -F'\t' '$1 == "hr@10" { print $2 }')
diag "batch job: hr@10 $hr2 on 2 tasks, $hr1 in the batch script, $hr here"
[ -n "$hr" ] && [ "$hr2" = "$hr" ] && [ "$hr1" = "$hr" ]
ok $? "the job's evaluations, on 2 tasks and on 1, give this model's HR@10"
ranks_same_hr one.ncfm.last batch.ncfm.last data.ncfc "2 ranks under sbatch"

# srun without PMIx: Open MPI could not start; ncf says what to do.
run slurm timeout 60 srun --mpi=none -n 2 ncf-train data.ncfc -o none.ncfm $RANKS_SHORT
[ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "srun --mpi=none -n 2: refused (status $status)"
like "$err" "ncf-train: started by srun as one of 2 tasks, but without PMIx: run srun --mpi=pmix" \
	"says to use --mpi=pmix"

# A rank killed: with --kill-on-bad-exit Slurm ends the step (SIGTERM,
# then SIGKILL after KillWait = 5 s), and rank 0 says it was waiting.
LONG="-e 50 -b 1024 --factors 16 --layers 64,32,16 --threads 1"
err=$T/err.kill
slurm timeout 60 srun --kill-on-bad-exit=1 -n 2 ncf-train data.ncfc -o dead.ncfm $LONG \
	>/dev/null 2>"$err" &
job=$!
for _ in $(seq 300); do
	grep -q "each taking 1/2" "$err" 2>/dev/null && break
	sleep 0.1
done
sleep 1
pid=""
for p in $(pgrep -x ncf-train); do
	tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_PROCID=1" &&
		tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_CONF=$C/slurm.conf" && pid=$p
done
k0=$(date +%s.%N)
[ -n "$pid" ] && kill -KILL "$pid"
wait $job
status=$?
secs=$(echo "$(date +%s.%N) $k0" | awk '{ printf "%.1f", $1 - $2 }')
[ -n "$pid" ] && [ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "rank 1 killed: the step ends (status $status after $secs s)"
like "$err" "task 1: Killed" "srun names the task killed"
like "$err" "rank 0 of 2: signal 15 .*while waiting .* for the other ranks" \
	"rank 0 says it was stopped while waiting for the others"

# Stopped: nothing of the cluster is left running.
pids=$(awk '{ print $2 }' "$C/pids")
ns=$(cat "$C/netns" 2>/dev/null)
sh "$CLUSTER" down "$C"
left=""
for p in $pids; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
for p in $(pgrep -x slurmstepd); do
	tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_CONF=$C/slurm.conf" &&
		left="$left $p"
done
[ -n "$ns" ] && ip netns list | grep -q "^$ns\b" && left="$left netns:$ns"
is "$left" "" "down stops munged, slurmctld, slurmd and every job step"
diag "the whole file: $(($(date +%s) - t0)) s"
done_testing
