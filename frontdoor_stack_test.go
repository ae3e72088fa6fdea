//go:build cgo

package xtc

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/cfuture"
	"github.com/xtc-go/xtc/internal/ctest"
)

// TestFrontDoorStackFrugal: a GoInt or a Batch.Do from a goroutine that
// has just started (a handler's, one per request) fits in the runtime's smallest
// goroutine stack with room for the caller's own frames, so the call
// copies no stack (gocall.go, stackFrugal). The probe: a stack that grew
// was copied elsewhere, so the address of a frame after the call differs
// from the one before. The child process runs with adaptivestackstart=0:
// every goroutine starts on the 2 KB minimum, whatever the test binary's
// history.
func TestFrontDoorStackFrugal(t *testing.T) {
	if underSanitizer {
		t.Skip("the race detector and ASan enlarge every frame")
	}
	if os.Getenv("XTC_STACK_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFrontDoorStackFrugal$", "-test.count=1", "-test.v")
		godebug := "adaptivestackstart=0"
		if v := os.Getenv("GODEBUG"); v != "" {
			godebug = v + "," + godebug
		}
		cmd.Env = append(os.Environ(), "XTC_STACK_CHILD=1", "GODEBUG="+godebug)
		out, err := cmd.CombinedOutput()
		t.Logf("child:\n%s", out)
		require.NoError(t, err)
		require.Contains(t, string(out), "--- PASS: TestFrontDoorStackFrugal")
		return
	}
	require.True(t, strings.Contains(os.Getenv("GODEBUG"), "adaptivestackstart=0"))
	e, bt, mb := moreExec(t)
	msg := []byte("m")
	fn := ctest.Ident()
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"plain cgo (the probe's check)", func() error { ctest.GocbDepth(); return nil }},
		{"GoInt, Background", func() error { _, err := e.GoInt(context.Background(), fn, 1); return err }},
		{"GoInt, a ctx that can end", func() error { _, err := e.GoInt(cctx, fn, 1); return err }},
		{"Batch.Do, Background", func() error { _, err := bt.Do(context.Background(), 1); return err }},
		{"Batch.Do, a ctx that can end", func() error { _, err := bt.Do(cctx, 1); return err }},
		{"Dispatch + Wait", func() error {
			f, err := Dispatch(e.Loop(0), cfuture.AddOne, nil)
			if err != nil {
				return err
			}
			_, err = f.Wait(context.Background())
			return err
		}},
		{"Send + Mailbox.Recv", func() error {
			if err := Send(mb.Pid(), msg); err != nil {
				return err
			}
			_, err := mb.Recv(context.Background())
			return err
		}},
	}
	// on a fresh goroutine under one frame of the caller's own (the
	// probe's closures and frugalFrame: ~250 bytes)
	fresh := func(call func() error) (moved bool, err error) {
		type res struct {
			moved bool
			err   error
		}
		ch := make(chan res)
		go func() {
			var r res
			frugalFrame(1, func() {
				before := frugalSP()
				r.err = call()
				r.moved = frugalSP() != before
			})
			ch <- r
		}()
		r := <-ch
		return r.moved, r.err
	}
	for _, c := range calls { // warm: the slots' channels are made once
		for k := 0; k < 50; k++ {
			_, err := fresh(c.call)
			require.NoError(t, err, c.name)
		}
	}
	for _, c := range calls {
		moved := 0
		for k := 0; k < 200; k++ {
			m, err := fresh(c.call)
			require.NoError(t, err, c.name)
			if m {
				moved++
			}
		}
		t.Logf("%s: the stack was copied in %d of 200 calls", c.name, moved)
		// Every call copied it before (the path needed more than the
		// 2 KB stack holds). A rare one still may: a contended channel
		// lock's slow path under the select is deeper than the rest.
		require.Less(t, moved, 20, c.name)
	}
}

// frugalSP is an address in its own frame: the caller's stack position.
//
//go:noinline
func frugalSP() uintptr {
	var x byte
	return uintptr(unsafe.Pointer(&x))
}

// frugalFrame calls f under d+1 frames of ~80 bytes each.
//
//go:noinline
func frugalFrame(d int, f func()) {
	var pad [48]byte
	pad[d%len(pad)] = byte(d)
	if d > 0 {
		frugalFrame(d-1, f)
	} else {
		f()
	}
	if pad[0] == 255 {
		panic("unreachable")
	}
}
