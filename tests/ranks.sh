# shellcheck shell=sh
# ranks.sh - the comparisons of many ranks against one, for every launcher:
# mpirun on one host (tests/cli/mpi.t), mpirun across network-namespace
# hosts over TCP (tests/cli/nodes.t), srun (tests/slurm/slurm.t).  Source
# it after lib.sh.
#
#   RANKS_SHORT              1 epoch of 8 steps at batch 65536
#   RANKS_LONG               2 epochs of 62 steps at batch 8192
#   ranks_same_params ONE TWO WHAT
#                            ok when checkpoint TWO (RANKS_SHORT, many
#                            ranks) has the parameters of ONE (one rank)
#   ranks_same_hr ONE TWO CACHE WHAT
#                            ok when models ONE and TWO (RANKS_LONG) have
#                            the same HR@10 on CACHE within 0.02
#
# Two ranks differ from one only in the order of float sums: each rank sums
# its half of every batch, then MPI adds the halves, and OpenBLAS may round
# a row by its place in the matrix (its AVX-512 kernels do), which the two
# ways of cutting a batch into chunks change.  Those ulps flip the odd ReLU
# that sits at 0, and Adam with beta2 = 0.5 is close to sign descent: a
# gradient whose sign rounding decides moves its parameter by +-lr =
# 4.5e-3 either way.  So the runs drift apart chaotically over many steps
# (after the 124 steps of RANKS_LONG most parameters differ by more than
# 1e-4 on an AVX-512 machine, while the HR@10 stays close), and the
# parameters are compared after a short run instead: 1 epoch of 8 steps at
# batch 65536.  There the MLP and head (every sample's sum) agree within
# 1e-4 (measured: under 1e-6) and at most 0.1% of all parameters move by
# more (measured: none; a rank whose gradient was lost or double-counted
# moves most of the embedding rows it saw).  The exact contract, the sum of
# the ranks' gradients against one rank's, is checked in-process by
# test_ranks.  The way the ranks talk (shared memory, TCP) changes nothing
# here: MPI_Allreduce of two ranks adds the same two numbers either way.
#
# After the 124 steps of RANKS_LONG the runs have drifted apart as two
# seeds would not: the HR@10 of 610 users has a binomial sigma of about
# 0.02 at 0.43; the two runs share their data, seed and most of their
# path, so 0.02 is generous.
RANKS_SHORT="-e 1 -b 65536 --factors 16 --layers 64,32,16 --threads 1"
RANKS_LONG="-e 2 -b 8192 --factors 16 --layers 64,32,16 --threads 1"

ranks_same_params() {
	"$NCF_ROOT/build/tests/tools/ckpt_diff" "$1" "$2" >"$T/ranks_diff.txt"
	_dense=$(awk -F'\t' '$1 == "dense_max_abs" { print $2 }' "$T/ranks_diff.txt")
	_over=$(awk -F'\t' '$1 == "over_1e-4" { print $2 }' "$T/ranks_diff.txt")
	diag "1 rank vs $3 after 8 steps: MLP and head max |difference| ${_dense:-?}, share over 1e-4 ${_over:-?}"
	awk -v d="${_dense:-x}" -v f="${_over:-x}" \
		'BEGIN { exit !(d ~ /^[0-9.e+-]+$/ && f ~ /^[0-9.e+-]+$/ && d <= 1e-4 && f <= 1e-3) }'
	ok $? "$3 give the 1-rank parameters after 8 steps (summation order only)"
}

ranks_same_hr() {
	_hr1=$(ncf-eval -m "$1" "$3" | awk -F'\t' '$1 == "hr@10" { print $2 }')
	_hr2=$(ncf-eval -m "$2" "$3" | awk -F'\t' '$1 == "hr@10" { print $2 }')
	diag "hr@10 after 2 epochs: 1 rank ${_hr1:-?}, $4 ${_hr2:-?}"
	awk -v a="${_hr1:-x}" -v b="${_hr2:-x}" \
		'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && d <= 0.02) }'
	ok $? "$4: the same HR@10 within 0.02"
}
