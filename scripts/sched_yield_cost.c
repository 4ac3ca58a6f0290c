/*
 * What a Linux schedule() costs when it picks the task it took off (prev == next, no
 * context switch): the source of `host.costs.repick_ns` (docs/model.md, cost table).
 *
 * A lone thread calls sched_yield() in a loop: each call is a system call's entry and
 * exit plus do_sched_yield() (the runqueue lock, yield_task_fair's update_curr) and
 * schedule(), which finds no other task and keeps the caller. A loop of a null system
 * call (getppid) measures the entry and exit alone; the difference is the scheduler's
 * part. Run it on an otherwise idle CPU:
 *
 *     cc -O2 -o sched_yield_cost scripts/sched_yield_cost.c
 *     taskset -c 1 ./sched_yield_cost
 *
 * Any other runnable task on that CPU turns the yields into context switches, and the
 * figure into something else. A KVM host's PLE handler calls the same schedule() after
 * a successful yield_to (kernel/sched/core.c yield_to: `if (yielded > 0) schedule()`),
 * with no system call around it.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void)
{
	const int n = 2000000;
	for (int rep = 0; rep < 5; rep++) {
		double a = now_ns();
		for (int i = 0; i < n; i++)
			syscall(SYS_getppid);
		double b = now_ns();
		for (int i = 0; i < n; i++)
			sched_yield();
		double c = now_ns();
		printf("null system call %.1f ns, sched_yield %.1f ns, schedule() part %.1f ns\n",
		       (b - a) / n, (c - b) / n, ((c - b) - (b - a)) / n);
	}
	return 0;
}
