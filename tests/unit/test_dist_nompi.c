/*
 * test_dist_nompi - common/dist.c as a build without MPI compiles it: one
 * rank, collectives that do nothing, and a refusal (not two silent copies)
 * when a launcher started several processes.
 */
#undef NCF_HAVE_MPI
#include "../../common/dist.c"

#include "tap.h"

static struct ncf_dist d;
static int argc = 1;
static char *args[] = {"test", NULL}, **argv = args;

/* No launcher's variables at all. */
static void clear_launchers(void)
{
	static const char *const names[] = {
		"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS",
		"PMIX_RANK", "PMI_RANK", "SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS",
		"SLURM_NTASKS", "SLURM_PROCID"};
	for (size_t k = 0; k < sizeof names / sizeof *names; k++)
		unsetenv(names[k]);
}

static void t_no_launcher(void)
{
	clear_launchers();
	tap_ok(ncf_dist_init(&d, &argc, &argv) == 0 && d.rank == 0 && d.size == 1,
	       "init 0, rank 0, size 1");
}

static void t_sum(void)
{
	float x[3] = {1, 2, 3};
	tap_ok(ncf_dist_sum_f32(&d, x, 3) == 0 && x[0] == 1 && x[2] == 3, "0, the data unchanged");
}

static void t_gather(void)
{
	uint32_t in[2] = {7, 8}, out[2] = {0, 0};
	int counts[1] = {2};
	tap_ok(ncf_dist_allgather_u32(&d, in, counts, out) == 0 && out[1] == 8, "0, the data copied");
}

/* With one launcher variable (or none: name NULL) set to value: init's
 * result want, and size 1 when it runs. */
static void t_launcher(const char *name, const char *value, int want)
{
	clear_launchers();
	if (name)
		setenv(name, value, 1);
	if (want)
		fprintf(stderr, "# expected message follows:\n");
	int rc = ncf_dist_init(&d, &argc, &argv);
	tap_ok(rc == want && (rc || d.size == 1), "init %d (want %d)", rc, want);
}

/* srun --mpi=pmix -n tasks: PMIx gives a rank but no size; Slurm the size. */
static void t_srun(const char *tasks, int want)
{
	clear_launchers();
	setenv("PMIX_RANK", "1", 1);
	setenv("SLURM_STEP_ID", "0", 1);
	setenv("SLURM_PROCID", "1", 1);
	setenv("SLURM_STEP_NUM_TASKS", tasks, 1);
	int rc = ncf_dist_init(&d, &argc, &argv);
	tap_ok(rc == want && (rc || d.size == 1), "init %d (want %d)", rc, want);
}

/* The batch script of sbatch -n 2 is no job step: one process. */
static void t_sbatch(void)
{
	clear_launchers();
	setenv("SLURM_NTASKS", "2", 1);
	setenv("SLURM_PROCID", "0", 1);
	tap_ok(ncf_dist_init(&d, &argc, &argv) == 0 && d.size == 1, "init 0, size 1");
}

int main(void)
{
	TEST(t_no_launcher(), "without a launcher: rank 0 of 1");
	TEST(t_sum(), "the all-reduce of one rank leaves the data as it is");
	TEST(t_gather(), "gather of one rank copies");
	TEST(t_launcher("OMPI_COMM_WORLD_SIZE", "1", 0), "mpirun -np 1: runs as one rank");
	TEST(t_launcher("OMPI_COMM_WORLD_SIZE", "2", -1), "mpirun -np 2 without MPI support: refused");
	TEST(t_launcher("PMI_SIZE", "4", -1), "an MPICH/Hydra launcher of 4: refused");
	TEST(t_srun("2", -1), "srun -n 2 (PMIx): refused");
	TEST(t_srun("1", 0), "srun -n 1: runs as one rank");
	TEST(t_sbatch(), "the batch script of sbatch -n 2: one process");
	return tap_done();
}
