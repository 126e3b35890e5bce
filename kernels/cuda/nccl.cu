/*
 * nccl.cu - the gradient's all-reduce across the ranks of a job (DESIGN.md
 * section 7; nccl.cuh): nothing with one rank; with several, NCCL,
 * its communicator made when the backend opens (rank 0 makes the id, MPI
 * broadcasts it, every rank joins), so that a job that cannot talk fails at
 * the start, not after the upload and a whole forward and backward pass.
 * A build without NCCL refuses several ranks with a message, then too.
 *
 * Ranks that share one process (the tests' in-process ranks, be->dist->mpi
 * 0) have no communicator: their gradients are summed by the test.
 */
#include "nccl.cuh"

#ifdef NCF_HAVE_NCCL
#include <nccl.h>

namespace NCF_CUDA_NS {

/* With NCF_CUDA_SYNC=1 a call that succeeded is also waited for (common.cuh
 * sync_after), so that a failure in its work names it. */
static int check_nccl(ncclResult_t r, const char *call, const char *file, int line)
{
	if (r == ncclSuccess)
		return sync_after(call, file, line);
	ncf_error("%s: %s:%d: NCCL: %s", call, file, line, ncclGetErrorString(r));
	return -1;
}
/* 0, or reports "call: file:line: NCCL: message" and is -1; NCCL_TRY returns
 * -1 from the caller then. */
#define NCCL_CHECK(call) check_nccl((call), #call, __FILE__, __LINE__)
#define NCCL_TRY(call)                    \
	do {                              \
		if (NCCL_CHECK(call) != 0) \
			return -1;        \
	} while (0)

struct nccl {
	ncclComm_t comm;
};

int nccl_open(struct ncf_backend *be, struct cu *c)
{
	struct ncf_dist *d = be->dist;
	if (d->size <= 1 || !d->mpi || c->nccl)
		return 0;
	ncclUniqueId id;
	memset(&id, 0, sizeof id);
	if (d->rank == 0)
		NCCL_TRY(ncclGetUniqueId(&id));
	NCF_TRY(ncf_dist_bcast(d, &id, sizeof id));
	ncclComm_t comm;
	NCCL_TRY(ncclCommInitRank(&comm, d->size, id, d->rank));
	c->nccl = (struct nccl *)ncf_xcalloc(1, sizeof *c->nccl);
	c->nccl->comm = comm;
	ncf_debug("cuda backend: rank %d of %d on GPU %d, NCCL communicator ready", d->rank,
		  d->size, c->dev);
	return 0;
}

int allreduce(struct ncf_backend *be, float *dev, size_t count)
{
	if (be->dist->size <= 1 || count == 0)
		return 0;
	struct cu *c = impl(be);
	if (!c->nccl) {
		ncf_error("cuda backend: %d ranks in one process have no NCCL communicator",
			  be->dist->size);
		return -1;
	}
	return NCCL_CHECK(ncclAllReduce(dev, dev, count, ncclFloat, ncclSum, c->nccl->comm, c->s));
}

void nccl_free(struct cu *c)
{
	if (!c->nccl)
		return;
	ncclCommDestroy(c->nccl->comm);
	free(c->nccl);
	c->nccl = NULL;
}

} /* namespace NCF_CUDA_NS */

#else /* no NCCL */

namespace NCF_CUDA_NS {

static int no_nccl(const struct ncf_dist *d)
{
	ncf_error("cuda backend: %d ranks need NCCL to sum gradients across GPUs, and this build "
		  "has none (rebuild where NCCL is installed)",
		  d->size);
	return -1;
}

int nccl_open(struct ncf_backend *be, struct cu *c)
{
	struct ncf_dist *d = be->dist;
	if (d->size <= 1 || !d->mpi)
		return 0;
	return no_nccl(d);
}

int allreduce(struct ncf_backend *be, float *dev, size_t count)
{
	struct ncf_dist *d = be->dist;
	if (d->size <= 1 || count == 0)
		return 0;
	return no_nccl(d);
}

void nccl_free(struct cu *c)
{
}

} /* namespace NCF_CUDA_NS */

#endif
