/*
 * test_dist_nompi - common/dist.c as a build without MPI compiles it: one
 * rank, collectives that do nothing, and a refusal (not two silent copies)
 * when a launcher started several processes.
 */
#undef NCF_HAVE_MPI
#include "../../common/dist.c"

#include "tap.h"

int main(void)
{
	tap_plan(9);
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMI_SIZE");
	unsetenv("PMIX_SIZE");
	unsetenv("MPI_LOCALNRANKS");
	unsetenv("PMIX_RANK");
	unsetenv("PMI_RANK");
	unsetenv("SLURM_STEP_ID");
	unsetenv("SLURM_STEP_NUM_TASKS");
	unsetenv("SLURM_NTASKS");
	unsetenv("SLURM_PROCID");
	struct ncf_dist d;
	int argc = 1;
	char *args[] = {"test", NULL}, **argv = args;
	tap_ok(ncf_dist_init(&d, &argc, &argv) == 0 && d.rank == 0 && d.size == 1,
	       "without a launcher: rank 0 of 1");
	float x[3] = {1, 2, 3};
	tap_ok(ncf_dist_sum_f32(&d, x, 3) == 0 && x[0] == 1 && x[2] == 3,
	       "the all-reduce of one rank leaves the data as it is");
	uint32_t in[2] = {7, 8}, out[2] = {0, 0};
	int counts[1] = {2};
	tap_ok(ncf_dist_allgather_u32(&d, in, counts, out) == 0 && out[1] == 8,
	       "gather of one rank copies");
	setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
	tap_ok(ncf_dist_init(&d, &argc, &argv) == 0 && d.size == 1, "mpirun -np 1: runs as one rank");
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	fprintf(stderr, "# expected message follows:\n");
	tap_ok(ncf_dist_init(&d, &argc, &argv) == -1, "mpirun -np 2 without MPI support: refused");
	unsetenv("OMPI_COMM_WORLD_SIZE");
	setenv("PMI_SIZE", "4", 1);
	tap_ok(ncf_dist_init(&d, &argc, &argv) == -1, "an MPICH/Hydra launcher of 4: refused");
	unsetenv("PMI_SIZE");
	/* srun --mpi=pmix -n 2: PMIx gives a rank but no size; Slurm the size */
	setenv("PMIX_RANK", "1", 1);
	setenv("SLURM_STEP_ID", "0", 1);
	setenv("SLURM_PROCID", "1", 1);
	setenv("SLURM_STEP_NUM_TASKS", "2", 1);
	tap_ok(ncf_dist_init(&d, &argc, &argv) == -1, "srun -n 2 (PMIx): refused");
	setenv("SLURM_STEP_NUM_TASKS", "1", 1);
	tap_ok(ncf_dist_init(&d, &argc, &argv) == 0 && d.size == 1, "srun -n 1: runs as one rank");
	/* the batch script of sbatch -n 2 is no job step: one process */
	unsetenv("PMIX_RANK");
	unsetenv("SLURM_STEP_ID");
	unsetenv("SLURM_STEP_NUM_TASKS");
	setenv("SLURM_NTASKS", "2", 1);
	setenv("SLURM_PROCID", "0", 1);
	tap_ok(ncf_dist_init(&d, &argc, &argv) == 0 && d.size == 1,
	       "the batch script of sbatch -n 2: one process");
	return tap_done();
}
