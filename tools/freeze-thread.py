#!/usr/bin/env python3
"""freeze-thread.py - freeze one thread of a running process at a time.

    tools/freeze-thread.py PID FREEZE_MS MAX_GAP_MS

Until PID exits: after a random gap of 10 to MAX_GAP_MS, stop one of its
threads picked at random (ptrace PTRACE_SEIZE + PTRACE_INTERRUPT: only that
thread stops, the others run on), hold it FREEZE_MS, and let it go
(PTRACE_DETACH, handing back a signal that arrived meanwhile). That is what
a busy host does to one thread of a guest: a test that assumes "the other
thread runs within 20 ms" (test_future's setter and fiber once did) fails
here, where freezing the whole process (SIGSTOP) moves every thread's
clock together and cannot tell. Used by tools/freeze-hunt.sh -t.
"""
import ctypes
import os
import random
import sys
import time

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                        ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def freeze(tid, ms):
    if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
        return  # gone, or not ours to trace
    # a seized thread must be detached from a stop: interrupt it first
    libc.ptrace(PTRACE_INTERRUPT, tid, None, None)
    try:
        _, status = os.waitpid(tid, WALL)
    except ChildProcessError:
        return  # it exited (a dead tracee is detached)
    if not os.WIFSTOPPED(status):
        return
    sig = os.WSTOPSIG(status)
    # the interrupt's stop reports SIGTRAP with an event in bits 16+; any
    # other stop is a signal on its way in: hand it back at the detach
    pending = 0 if (status >> 16) != 0 or sig == 5 else sig
    time.sleep(ms / 1000.0)
    libc.ptrace(PTRACE_DETACH, tid, None, ctypes.c_void_p(pending))


def exited(pid):
    # a process that exited stays a zombie (its /proc entries with it)
    # until its parent reaps it: stop then, or the loop never ends
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def main():
    pid, freeze_ms, gap = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    while True:
        time.sleep(random.randint(10, max(gap, 11)) / 1000.0)
        if exited(pid):
            return
        try:
            tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
        except OSError:
            return
        if not tids:
            return
        freeze(random.choice(tids), freeze_ms)


if __name__ == "__main__":
    main()
