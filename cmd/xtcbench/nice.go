package main

import "syscall"

// niceValue is the nice value of this process (0 if unknown).
func niceValue() int {
	// getpriority returns 20 - nice on Linux (the raw syscall avoids
	// the libc adjustment).
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - p
}
