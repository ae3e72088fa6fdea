// Command proc runs C functions of its own, written in this file's cgo
// preamble, as xtc procs, and feeds them work from goroutines.
//
// Two C procs each receive numbers through their mailbox (xtc_recv), compute
// the length of the Collatz sequence of each, yield to each other between
// numbers (xtc_yield) and keep their best result in C memory the Go side
// reads once the loop has finished. Go goroutines send the numbers with
// xtc.Send while the loop runs on its own thread.
//
//	go run ./examples/go/proc
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../../csrc/include -std=gnu11
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "xtc.h"

typedef struct result {
	uint64_t best_n, best_len, count;
} result_t;

XTC_PREEMPTIBLE static uint64_t collatz_len(uint64_t n)
{
	uint64_t len = 1;
	while (n != 1) {
		n = (n & 1) ? 3 * n + 1 : n / 2;
		len++;
	}
	return len;
}

// The proc body: runs on its own fiber stack, never calls Go.
XTC_PREEMPTIBLE static void collatz_worker(void *arg)
{
	result_t *r = arg;
	for (;;) {
		void *msg;
		size_t len;
		if (xtc_recv(&msg, &len, -1) != XTC_OK)
			return;
		if (len != sizeof(uint64_t)) { // an empty message ends the work
			xtc_free(msg);
			return;
		}
		uint64_t n;
		memcpy(&n, msg, sizeof n);
		xtc_free(msg);
		uint64_t l = collatz_len(n);
		if (l > r->best_len) {
			r->best_len = l;
			r->best_n = n;
		}
		r->count++;
		xtc_yield(); // let the other worker run
	}
}

static void *worker_fn(void) { return (void *)collatz_worker; }
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"log"
	"sync"
	"unsafe"

	"github.com/xtc-go/xtc"
)

func main() {
	loop, err := xtc.LoopInit()
	if err != nil {
		log.Fatal(err)
	}
	defer loop.Fini()

	const workers = 2
	results := (*[workers]C.result_t)(C.calloc(workers, C.size_t(unsafe.Sizeof(C.result_t{}))))
	defer C.free(unsafe.Pointer(results))

	var pids [workers]xtc.Pid
	for i := range pids {
		pids[i], err = xtc.ProcSpawn(loop, C.worker_fn(), unsafe.Pointer(&results[i]),
			&xtc.ProcOpts{Name: fmt.Sprintf("collatz-%d", i), MailboxCap: 1 << 16})
		if err != nil {
			log.Fatal(err)
		}
	}

	done := make(chan error, 1)
	go func() { done <- loop.Run() }() // the loop runs on its own thread

	// Feed work from goroutines, then tell each worker to stop.
	const limit = 100_000
	var wg sync.WaitGroup
	for i := range pids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var b [8]byte
			for n := uint64(1 + i); n <= limit; n += workers {
				binary.NativeEndian.PutUint64(b[:], n)
				if err := xtc.Send(pids[i], b[:]); err != nil {
					log.Fatalf("send to %v: %v", pids[i], err)
				}
			}
			_ = xtc.Send(pids[i], nil)
		}(i)
	}
	wg.Wait()
	if err := <-done; err != nil {
		log.Fatal(err)
	}

	for i := range pids {
		r := &results[i]
		fmt.Printf("proc %v: %d numbers, longest chain %d at n=%d\n",
			pids[i], r.count, r.best_len, r.best_n)
	}
	fmt.Printf("xtc %s, io backend %s, %s\n", xtc.Version(), xtc.IOBackendName(), xtc.LinkInfo)
}
