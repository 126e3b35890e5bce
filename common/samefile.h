/*
 * samefile.h - refuse a command line whose output is the same file as one
 * of its inputs or as another of its outputs, before anything is read or
 * written: `ncf-prep -o r.csv r.csv` would replace the ratings by the
 * cache, `ncf-train c.ncfc -o c.ncfc` the cache by a model.
 *
 * Two names are the same file when both exist and have one device and
 * inode (hard links, symbolic links, "./x" and "x"), or when neither
 * exists yet and both lead to one name (ncf_out_final_name).  "-" is
 * stdin for an input and stdout for an output, compared by what the
 * descriptor is; several outputs may share stdout on purpose (ncf-eval
 * --scores - prints the metrics first).  Only regular files and names not
 * yet created are compared: a FIFO or a device (/dev/null) can be named
 * twice.
 */
#ifndef NCF_SAMEFILE_H
#define NCF_SAMEFILE_H

#include <stddef.h>

struct ncf_named {
	const char *path; /* as given; NULL: not given (skipped); "-": stdin/stdout */
	const char *what; /* for the message: "the input", "-o", "--log"
			     ("-" is said "standard input/output") */
	int output;	  /* 1: written; 0: read */
	int read_first;	  /* an input read in full before any output is
			     opened, which may therefore also be an output
			     that is replaced (ncf-train --resume FILE
			     --checkpoint FILE) */
	int appends;	  /* an output written in place, not replaced
			     (ncf-train --log): never an input */
	const char *series; /* a numbered series of outputs PATH SERIES NNN,
			       NNN from 1 to series_last written with at
			       least three digits (ncf-train --keep-epochs:
			       MODEL.epoch-001 ...); path is then the prefix,
			       not a file */
	unsigned series_last;
};

/*
 * Check the n files of one command line.  Returns 0, or -1 after one
 * message naming both files ("-o r.csv is the same file as the input
 * r.csv"); the tool then exits 2, having touched nothing.  A series is
 * compared member by member, through the members that can meet another
 * file: those that exist in the prefix's directory (a name, a link) and
 * those that another file's name leads to; never by trying every number.
 */
int ncf_refuse_same_file(const struct ncf_named *f, size_t n);

/*
 * Can every output of the n files be created (ncf_out_probe; a series
 * through its prefix's directory)?  For before any work, so that a
 * directory given as -o or a read-only file system is said at once and
 * not after an epoch.  Returns 0, or -1 after reporting the first that
 * cannot (the tool exits 1).
 */
int ncf_probe_outputs(const struct ncf_named *f, size_t n);

#endif
