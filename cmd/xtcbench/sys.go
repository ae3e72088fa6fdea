package main

// What xtcbench asks the kernel about itself, through golang.org/x/sys/unix
// (the frozen syscall package has no sched_getaffinity): CPU time of the
// process, the nice value, and the CPUs the process may run on.

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func rusageCPU(who int) time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(who, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the user+system CPU time of the whole process: on a shared
// machine wall time mostly measures how often the OS ran us, CPU time what
// the variant cost.
func processCPU() time.Duration { return rusageCPU(unix.RUSAGE_SELF) }

// niceValue is the nice value of this process (0 if unknown).
func niceValue() int {
	// the raw getpriority returns 20 - nice on Linux (no libc adjustment)
	p, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - p
}

// affinityCPUs lists the CPUs the process may run on, as ranges
// ("0-1", "0,2-3"); "unknown" when the kernel does not say. A run under
// taskset or a cgroup cpuset shows here, not in the machine's CPU count.
func affinityCPUs() string {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return "unknown"
	}
	var parts []string
	for c, n := 0, len(set)*64; c < n; c++ {
		if !set.IsSet(c) {
			continue
		}
		e := c
		for e+1 < n && set.IsSet(e+1) {
			e++
		}
		if e == c {
			parts = append(parts, fmt.Sprint(c))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", c, e))
		}
		c = e
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, ",")
}
