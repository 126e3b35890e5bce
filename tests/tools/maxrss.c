/*
 * maxrss FILE CMD [ARG...] - run CMD, write its peak resident memory in
 * KiB (getrusage of the child) to FILE, exit with its status (128 + N
 * when signal N killed it).  A test helper (tests/cli/crafted.t): the
 * readers' memory on hostile files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: maxrss FILE CMD [ARG...]\n");
		return 2;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("maxrss: fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		perror(argv[2]);
		_exit(127);
	}
	int st;
	struct rusage ru;
	if (wait4(pid, &st, 0, &ru) < 0) {
		perror("maxrss: wait4");
		return 2;
	}
	FILE *fp = fopen(argv[1], "w");
	if (!fp || fprintf(fp, "%ld\n", ru.ru_maxrss) < 0 || fclose(fp) != 0) {
		perror(argv[1]);
		return 2;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
