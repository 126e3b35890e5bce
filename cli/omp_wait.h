/*
 * omp_wait.h - how the tools' OpenMP threads wait between parallel
 * regions.  libgomp's own default spins for about 300,000 rounds before it
 * sleeps, and OMP_WAIT_POLICY=active for ever: on a machine whose cores
 * are busy with other work the spinning threads take the cores the
 * working ones need, and training ran several times slower.  ncf's
 * default is the one measured never to be much worse than the best, on a
 * quiet and on a busy machine, for 1 and 2 threads, training and scoring
 * (ncf(7), THREADS; make bench prints the table): a bounded spin of 1,000
 * rounds (some microseconds, which catches the short waits between one
 * region and the next, then a sleep that gives the core away), as good as
 * passive waiting where the cores are busy and no worse where they are
 * not.  A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is left as it is.
 *
 * libgomp reads both once, when it is loaded, before main: setting one in
 * main is too late.  So where neither is set, the tool sets its default
 * and runs itself again (execv of /proc/self/exe, the same process), as
 * the first thing main does.
 */
#ifndef NCF_OMP_WAIT_H
#define NCF_OMP_WAIT_H

/* The default, as NAME=VALUE (GOMP_SPINCOUNT without OMP_WAIT_POLICY:
 * spin that many rounds, then sleep). */
#define NCF_OMP_WAIT_DEFAULT "GOMP_SPINCOUNT=1000"

/* First in main: with neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT in the
 * environment, set NCF_OMP_WAIT_DEFAULT and run argv again; returns when
 * one is set, or when that cannot be done (libgomp's default then). */
void ncf_omp_wait_init(char **argv);

/* What the threads do, for -v: "GOMP_SPINCOUNT=1000 (ncf's default)",
 * "OMP_WAIT_POLICY=passive (from the environment)". */
const char *ncf_omp_wait_note(void);

#endif
