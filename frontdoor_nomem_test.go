//go:build cgo

package xtc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// A call whose proc the kernel refuses a stack fails with ErrNomem, and
// the error names the limit it hit, as ProcSpawn's does (issue 30): the
// executor's calls get a 1 GiB default stack under an address-space limit
// that leaves less than that. In a child process, so that neither the
// limit nor the stack size touches the other tests.
func TestFrontDoorNomemReason(t *testing.T) {
	if os.Getenv("XTC_FRONTDOOR_NOMEM_CHILD") == "1" {
		frontDoorNomemChild(t)
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run", "^TestFrontDoorNomemReason$", "-test.v", "-test.count", "1")
	cmd.Env = append(os.Environ(), "XTC_FRONTDOOR_NOMEM_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestFrontDoorNomemReason", "child:\n%s", out)
}

func frontDoorNomemChild(t *testing.T) {
	e, err := NewExec(1)
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Start()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v, err := e.GoInt(ctx, ctest.Ident(), 7) // the path works first
	require.NoError(t, err)
	require.Equal(t, int64(7), v)

	defer func(n int) { require.NoError(t, SetStackSize(n)) }(StackSize())
	require.NoError(t, SetStackSize(1<<30))
	var old syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_AS, &old))
	lim := old
	lim.Cur = vmSize(t) + 256<<20 // room for Go, not for the stack
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_AS, &lim))
	defer func() { require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_AS, &old)) }()

	check := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, ErrNomem)
		var xe *Error
		require.True(t, errors.As(err, &xe))
		assert.Contains(t, xe.Reason, "RLIMIT_AS", "the limit is named: %v", err)
	}
	_, err = e.GoInt(ctx, ctest.Ident(), 1) // spawned on the carrier
	check(err)
	_, err = e.Go(ctx, ctest.Ident(), nil, WithName("nomem"))
	check(err)
	_, err = DispatchWait(ctx, e.Loop(0), ctest.Ident(), nil) // xtc_dispatch
	check(err)
	// spawned from this thread, its stack mapped by the carrier at its
	// first run: the refusal comes back through Wait (it was ErrAborted)
	r, err := e.GoAsync(ctest.Ident(), nil)
	if err == nil {
		_, err = r.Wait(ctx)
	}
	check(err)
	// and the executor still runs calls once stacks fit again
	require.NoError(t, SetStackSize(64<<10))
	v, err = e.GoInt(ctx, ctest.Ident(), 9)
	require.NoError(t, err)
	require.Equal(t, int64(9), v)
}

// vmSize is the process's address space in bytes (/proc/self/status).
func vmSize(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmSize:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmSize in /proc/self/status")
	return 0
}
