/*
 * omp_wait.h - how the tools' OpenMP threads wait between parallel
 * regions.  libgomp's own default spins for about 300,000 rounds before it
 * sleeps, and OMP_WAIT_POLICY=active for ever: on a machine whose cores
 * are busy with other work the spinning threads take the cores the
 * working ones need, and training ran several times slower.  ncf's
 * default is the one measured never to be much worse than the best, on a
 * quiet and on a busy machine, for 1 and 2 threads, training and scoring
 * (ncf(7), THREADS; make bench prints the table): passive waiting, which
 * gives the core away at once.  A bounded spin (GOMP_SPINCOUNT=1000) came
 * within the noise of it; libgomp's default and active waiting ran 2
 * threads at a tenth of its speed.  A user's OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT is left as it is.
 *
 * libgomp reads both once, when it is loaded, before main: setting one in
 * main is too late.  So where neither is set, the tool sets its default
 * and runs itself again (execv of /proc/self/exe, the same process), as
 * the first thing main does.
 */
#ifndef NCF_OMP_WAIT_H
#define NCF_OMP_WAIT_H

/* The default, as NAME=VALUE. */
#define NCF_OMP_WAIT_DEFAULT "OMP_WAIT_POLICY=passive"

/* First in main: with neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT in the
 * environment, set NCF_OMP_WAIT_DEFAULT and run argv again; returns when
 * one is set, or when that cannot be done (libgomp's default then). */
void ncf_omp_wait_init(char **argv);

/* What the threads do, for -v: "OMP_WAIT_POLICY=passive (ncf's
 * default; ...)", "GOMP_SPINCOUNT=1000 (from the environment)". */
const char *ncf_omp_wait_note(void);

#endif
