/*
 * nccl.cu - the gradient's all-reduce across the ranks of a job (DESIGN.md
 * section 7; see backend.cuh): nothing with one rank; with several, NCCL,
 * its communicator bootstrapped through MPI (common/dist.c) on first use.
 * A build without NCCL refuses several ranks with a message.
 */
#include "backend.cuh"

#ifdef NCF_HAVE_NCCL
#include <nccl.h>

namespace NCF_CUDA_NS {

static int check_nccl(ncclResult_t r, const char *call, const char *file, int line)
{
	if (r == ncclSuccess)
		return 0;
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

/* The communicator of be->dist's ranks: rank 0 makes the id, MPI
 * broadcasts it. */
static int nccl_open(struct ncf_backend *be, struct cu *c)
{
	struct ncf_dist *d = be->dist;
	ncclUniqueId id;
	memset(&id, 0, sizeof id);
	if (d->rank == 0)
		NCCL_TRY(ncclGetUniqueId(&id));
	NCF_TRY(ncf_dist_bcast(d, &id, sizeof id));
	ncclComm_t comm;
	NCCL_TRY(ncclCommInitRank(&comm, d->size, id, d->rank));
	c->nccl = (struct nccl *)ncf_xcalloc(1, sizeof *c->nccl);
	c->nccl->comm = comm;
	return 0;
}

int allreduce(struct ncf_backend *be, float *dev, size_t count)
{
	if (be->dist->size <= 1 || count == 0)
		return 0;
	struct cu *c = impl(be);
	if (!c->nccl)
		NCF_TRY(nccl_open(be, c));
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

int allreduce(struct ncf_backend *be, float *dev, size_t count)
{
	struct ncf_dist *d = be->dist;
	if (d->size <= 1 || count == 0)
		return 0;
	ncf_error("cuda backend: %d ranks need NCCL to sum gradients across GPUs, and this build "
		  "has none (rebuild where NCCL is installed)",
		  d->size);
	return -1;
}

void nccl_free(struct cu *c)
{
}

} /* namespace NCF_CUDA_NS */

#endif
