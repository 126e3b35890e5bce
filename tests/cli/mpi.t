#!/bin/bash
# mpi.t - data-parallel ncf-train under mpirun on CPU ranks:
# 2 ranks against 1, mpirun -np 1 against no mpirun, and a failing or dying
# rank ending the whole job (within a time limit) rather than hanging it.
. "$(dirname "$0")/../lib.sh"
command -v mpirun >/dev/null 2>&1 || skip_all "mpirun not installed"
ncf-train -vV 2>/dev/null | grep -q '^features:.* mpi' || skip_all "built without MPI"
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
cd "$T"
ncf-prep -q --synthetic ml-latest-small -o data.ncfc
. "$NCF_ROOT/tests/ranks.sh"

ncf-train -q data.ncfc -o one.ncfm $RANKS_LONG
run $MPIRUN -np 2 ncf-train data.ncfc -o two.ncfm $RANKS_LONG
ok $status "mpirun -np 2 ncf-train"
like "$err" "2 ranks, each taking 1/2 of every global batch" "says how the batch is split"
like "$err" "samples/s per rank" "the summary gives the per-rank throughput"
# The tolerances and their reasons: tests/ranks.sh.
ncf-train -q data.ncfc -o one8.ncfm $RANKS_SHORT
run $MPIRUN -np 2 ncf-train -v data.ncfc -o two8.ncfm $RANKS_SHORT
like "$err" "rank 1 of 2, local rank 1 of 2 on " "each rank knows its rank and local rank"
ranks_same_params one8.ncfm.last two8.ncfm.last "2 ranks"
ranks_same_hr one.ncfm.last two.ncfm.last data.ncfc "2 ranks"
hr1=$_hr1
run $MPIRUN -np 1 ncf-train data.ncfc -o np1.ncfm $RANKS_LONG
cmp -s one.ncfm.last np1.ncfm.last && cmp -s one.ncfm np1.ncfm
ok $? "mpirun -np 1 writes the same bytes as no mpirun"
# Evaluation split by users across ranks gives the same metrics.
run $MPIRUN -np 2 ncf-eval -m one.ncfm.last data.ncfc
is "$(grep "^hr@10" "$out" | cut -f2)" "$hr1" "ncf-eval on 2 ranks: the same HR@10"

# A rank that cannot open the cache ends the job: non-zero, a message, no hang.
cat >fail.sh <<'SH'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-0}
if [ "$r" = 1 ]; then exec ncf-train missing.ncfc -o bad.ncfm -e 2 -b 8192; fi
exec ncf-train data.ncfc -o bad.ncfm -e 50 -b 1024
SH
chmod +x fail.sh
run timeout 120 $MPIRUN -np 2 ./fail.sh
[ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "a rank failing to open the cache ends the job (status $status, not a timeout)"
like "$err" "missing.ncfc" "the message names the file"
[ ! -e bad.ncfm ]
ok $? "no model is left behind"

# Ranks that load different caches (a stale node-local copy) are refused
# before the first collective, instead of hanging or crashing in MPI.
ncf-prep -q --synthetic ml-latest-small --seed 2 -o other.ncfc
cat >mismatch.sh <<'SH'
#!/bin/sh
c=data.ncfc
[ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ] && c=other.ncfc
exec ncf-train "$c" -o mm.ncfm -e 1 -b 8192 --factors 8 --layers 16,8 --threads 1
SH
chmod +x mismatch.sh
run timeout 120 $MPIRUN -np 2 ./mismatch.sh
[ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "ranks with different caches: the job stops (status $status)"
like "$err" "rank 1 of 2: its cache differs from rank 0's" "and says which rank differs"

# A rank killed in the middle of training ends the job too.
cat >die.sh <<'SH'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-0}
ncf-train data.ncfc -o dead.ncfm -e 50 -b 1024 --threads 1 &
pid=$!
if [ "$r" = 1 ]; then sleep 2; kill -KILL $pid; fi
wait $pid
SH
chmod +x die.sh
run timeout 120 $MPIRUN -np 2 ./die.sh
[ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "a rank killed mid-training ends the job (status $status, not a timeout)"

# A rank that hangs (stopped) is noticed by no launcher: the others' watchdog
# ends the job after NCF_DIST_TIMEOUT seconds without an answer, saying so.
cat >hang.sh <<'SH'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-0}
ncf-train data.ncfc -o hung.ncfm -e 50 -b 1024 --threads 1 &
pid=$!
if [ "$r" = 1 ]; then sleep 2; kill -STOP $pid; fi
wait $pid
SH
chmod +x hang.sh
run timeout 120 $MPIRUN -np 2 -x NCF_DIST_TIMEOUT=3 ./hang.sh
[ "$status" != 0 ] && [ "$status" != 124 ]
ok $? "a rank hung mid-training ends the job (status $status, not a timeout)"
like "$err" "rank 0 of 2: no answer from the other ranks for [0-9]+ s in MPI_Allreduce" \
	"rank 0 says it waited in vain"
done_testing
