//go:build cgo

package xtc

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

func TestPreemptErrors(t *testing.T) {
	assert.True(t, PreemptSupported())
	assert.ErrorIs(t, PreemptArm(0), ErrInval)
	assert.ErrorIs(t, PreemptArm(-time.Millisecond), ErrInval)
	assert.NoError(t, PreemptDisarm()) // not armed: fine
	assert.ErrorIs(t, PreemptSetSignal(1), ErrRange)
	assert.GreaterOrEqual(t, PreemptSignal(), 34+3)
	assert.False(t, PreemptTickPending())

	_, err := NewQuantum(QuantumOpts{Min: 10 * time.Microsecond, Max: time.Microsecond})
	assert.ErrorIs(t, err, ErrRange)
	_, err = NewQuantum(QuantumOpts{Min: -1})
	assert.ErrorIs(t, err, ErrInval)
	_, err = NewQuantum(QuantumOpts{Window: -1})
	assert.ErrorIs(t, err, ErrInval)
	var nq *Quantum
	assert.ErrorIs(t, nq.Record(time.Microsecond), ErrInval)
	assert.ErrorIs(t, nq.AddBusy(time.Microsecond), ErrInval)
	assert.ErrorIs(t, nq.SetLoad(0.5), ErrInval)
	_, err = nq.Update()
	assert.ErrorIs(t, err, ErrInval)
	assert.Zero(t, nq.Get())
	nq.Close()
	var ne *Exec
	assert.ErrorIs(t, ne.SetPreemptAdaptive(nil), ErrInval)
}

// The overhead budget: range checks, the value round-trips, 0 turns it
// off; the policy itself is tested in C (test_preempt: budget_policy).
func TestPreemptBudget(t *testing.T) {
	def := PreemptBudget()
	assert.Equal(t, 20, def)
	assert.ErrorIs(t, PreemptSetBudget(-1), ErrInval)
	assert.ErrorIs(t, PreemptSetBudget(101), ErrInval)
	assert.Equal(t, def, PreemptBudget())
	require.NoError(t, PreemptSetBudget(0))
	assert.Equal(t, 0, PreemptBudget())
	require.NoError(t, PreemptSetBudget(100))
	assert.Equal(t, 100, PreemptBudget())
	require.NoError(t, PreemptSetBudget(def))
}

// Close is safe against concurrent use and twice; a closed controller
// answers ErrInval / zero and cannot be attached.
func TestQuantumClosed(t *testing.T) {
	q, err := NewQuantum(QuantumOpts{})
	require.NoError(t, err)
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	require.NoError(t, e.SetPreemptAdaptive(q))
	stop := make(chan struct{})
	done := make(chan struct{})
	var rounds atomic.Int64
	go func() { // hammers the controller while it is closed under it
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = q.Record(time.Microsecond)
			_ = q.Get()
			_, _ = q.Update()
			rounds.Add(1)
		}
	}()
	require.Eventually(t, func() bool { return rounds.Load() >= 100 }, eventBound,
		100*time.Microsecond, "the hammer never ran")
	q.Close() // detaches from e as well
	close(stop)
	<-done
	q.Close()
	assert.ErrorIs(t, q.Record(time.Microsecond), ErrInval)
	assert.ErrorIs(t, q.AddBusy(time.Microsecond), ErrInval)
	assert.ErrorIs(t, q.SetLoad(0.5), ErrInval)
	_, err = q.Update()
	assert.ErrorIs(t, err, ErrInval)
	assert.Zero(t, q.Get())
	assert.Zero(t, q.TailIndex())
	assert.Zero(t, q.Load())
	assert.ErrorIs(t, e.SetPreemptAdaptive(q), ErrInval)
	assert.NoError(t, e.SetPreemptAdaptive(nil))
}

func TestPreemptArmLocked(t *testing.T) {
	// A locked goroutine's thread ticks while it runs and stops when
	// disarmed.
	done := make(chan struct{})
	var ticks uint64
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(t, PreemptArm(time.Millisecond))
		// until a tick came (bounded), not for a time the thread may
		// spend off CPU
		t0 := time.Now()
		for PreemptTicks() == 0 && time.Since(t0) < eventBound {
		}
		ticks = PreemptTicks()
		assert.NoError(t, PreemptDisarm())
	}()
	<-done
	assert.Greater(t, ticks, uint64(0))
}

func TestPreemptMapFindsRuntime(t *testing.T) {
	// The code map (rtcode_int.h) holds one record per text section of
	// every runtime object, whether or not the binary has a symbol table.
	n, files, ok := preemptMapInfo()
	require.True(t, ok, "runtime code not located")
	assert.GreaterOrEqual(t, n, files)
	assert.Greater(t, files, 20)
}

// The code map is exactly the runtime's code, by construction: every csrc file
// of this build has records (a csrc file without rtcode_int.h fails here),
// no other file has, runtime code is denied, and user code in a file named
// like a runtime file (internal/ctest/loop_timer.c) or named xtc_* is not.
func TestPreemptCodeMapByConstruction(t *testing.T) {
	_, _, ok := preemptMapInfo()
	require.True(t, ok, "runtime code not located")
	srcs, err := filepath.Glob("csrc/*.[cS]")
	require.NoError(t, err)
	want := map[string]bool{}
	for _, s := range srcs {
		if strings.HasSuffix(s, ".S") && !strings.HasSuffix(s, "_"+runtime.GOARCH+".S") {
			continue
		}
		want[filepath.Base(s)] = true
	}
	got := map[string]bool{}
	for _, f := range ctest.CodemapFiles() {
		got[f] = true
	}
	assert.Equal(t, want, got, "code map records vs the csrc/ files of this build")
	assert.False(t, ctest.PreemptPCOK(ctest.YieldFn()), "xtc_yield is runtime code")
	if staticExecutable(t) {
		// internal/ctest's objects are linked after package xtc's: in a
		// static executable that is libc's side (xtc_preempt(3)).
		t.Log("static executable: C code linked after package xtc is not preempted")
		return
	}
	assert.True(t, ctest.PreemptPCOK(ctest.SpinFn()), "a declared user kernel is preemptible")
	// undeclared user code: only under the policy that allows the
	// program's own text, whatever its file or function is called
	assert.False(t, ctest.PreemptPCOK(ctest.CodemapTimerFn), "undeclared code, default policy")
	require.NoError(t, PreemptSetPolicy(PreemptProgram))
	defer func() { require.NoError(t, PreemptSetPolicy(PreemptDeclared)) }()
	assert.True(t, ctest.PreemptPCOK(ctest.CodemapTimerFn), "user code in a file named loop_timer.c")
	assert.True(t, ctest.PreemptPCOK(ctest.CodemapXtcFn), "a user function named xtc_*")
}

// What may be preempted (xtc_preempt(3) SAFETY): declared kernels by
// default, the program's text and every non-system object as opt-ins; the
// Go API's error paths.
func TestPreemptPolicy(t *testing.T) {
	assert.Equal(t, PreemptDeclared, PreemptGetPolicy())
	assert.True(t, PreemptPreemptible(ctest.SpinFn()), "declared with the section attribute")
	assert.False(t, PreemptPreemptible(ctest.CodemapTimerFn), "not declared")
	for _, p := range []PreemptPolicy{PreemptProgram, PreemptAny} {
		require.NoError(t, PreemptSetPolicy(p))
		assert.Equal(t, p, PreemptGetPolicy())
		if !staticExecutable(t) {
			assert.True(t, PreemptPreemptible(ctest.CodemapTimerFn), "policy %v", p)
		}
		assert.False(t, PreemptPreemptible(ctest.YieldFn()), "the runtime, policy %v", p)
	}
	require.NoError(t, PreemptSetPolicy(PreemptDeclared))
	assert.Equal(t, "declared", PreemptDeclared.String())
	assert.Equal(t, "any", PreemptAny.String())
	assert.ErrorIs(t, PreemptSetPolicy(PreemptPolicy(9)), ErrInval)
	assert.ErrorIs(t, PreemptAllowObject(""), ErrInval)
	assert.ErrorIs(t, PreemptDeclare(0, 0), ErrInval)
	assert.ErrorIs(t, PreemptDeclare(16, 8), ErrInval)
	assert.ErrorIs(t, PreemptUndeclare(8, 16), ErrNotfound)
	// a range declared at run time (as for JIT code)
	lo := uintptr(ctest.CodemapTimerFn)
	require.NoError(t, PreemptDeclare(lo, lo+1))
	assert.True(t, PreemptPreemptible(ctest.CodemapTimerFn))
	require.NoError(t, PreemptUndeclare(lo, lo+1))
	assert.False(t, PreemptPreemptible(ctest.CodemapTimerFn))
	require.NoError(t, PreemptAllowObject("libxtc-no-such-object.so"))
}

// staticExecutable: this test binary has no program interpreter (linked
// with -extldflags -static).
func staticExecutable(t *testing.T) bool {
	exe, err := os.Executable()
	require.NoError(t, err)
	f, err := elf.Open(exe)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

func TestPreemptQuantum(t *testing.T) {
	q, err := NewQuantum(QuantumOpts{Min: 5 * time.Microsecond, Max: time.Millisecond,
		Initial: 100 * time.Microsecond, Period: time.Hour})
	require.NoError(t, err)
	defer q.Close()
	assert.Equal(t, 100*time.Microsecond, q.Get())
	for i := 0; i < 1000; i++ {
		require.NoError(t, q.Record(time.Duration(1000+i%100)))
	}
	require.NoError(t, q.SetLoad(0.05))
	v, err := q.Update()
	require.NoError(t, err)
	// low load: longer (by how much depends on the measured preemption
	// cost, which the floor follows)
	assert.Greater(t, v, 100*time.Microsecond)
	assert.InDelta(t, 0.05, q.Load(), 1e-9)
	assert.Greater(t, q.TailIndex(), 2.0)
	require.NoError(t, q.AddBusy(time.Millisecond))
	require.NoError(t, q.SetLoad(-1))
}

// shortsBesideKernel starts kernel (a spinner polling stop) on the
// executor's loop 0, then serves 20 short requests one after the other;
// each must complete while the kernel still runs. Returns the kernel's
// future (the caller sets stop).
func shortsBesideKernel(t *testing.T, e *Exec, kernel unsafe.Pointer, stop ctest.Flag) *Future {
	t.Helper()
	started := ctest.Starts()
	spin, err := Submit(e.Loop(0), kernel, stop.Ptr())
	require.NoError(t, err)
	waitStarted(t, started) // the kernel owns the loop now
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		f, err := Submit(e.Loop(0), ctest.ShortFn(), nil)
		require.NoError(t, err)
		v, err := f.Wait(ctx)
		cancel()
		if err != nil {
			st, sent := PreemptStatsGlobal()
			t.Logf("stats %+v sent %d", st, sent)
		}
		require.NoError(t, err)
		assert.Equal(t, int64(7), v)
	}
	assert.False(t, spin.Ready(), "the kernel must still be spinning")
	return spin
}

// A C kernel that never yields shares its loop with short requests: with
// the involuntary path on, the requests complete while it spins.
func TestPreemptTimeSlicesNeverYieldingKernel(t *testing.T) {
	if !PreemptInvoluntarySupported() {
		t.Skip("no involuntary preemption on this platform")
	}
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	require.NoError(t, e.SetPreempt(500*time.Microsecond))
	e.SetServiceMode(true) // keep running while idle: work arrives later
	PreemptSetInvoluntary(true)
	defer PreemptSetInvoluntary(false)
	run, err := e.Start()
	require.NoError(t, err)

	stop := ctest.NewFlag()
	defer stop.Free()
	spin := shortsBesideKernel(t, e, ctest.SpinFn(), stop)
	stop.Set()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := spin.Wait(ctx)
	require.NoError(t, err)
	assert.Greater(t, v, int64(0))
	st, sent := PreemptStatsGlobal()
	assert.Greater(t, st.Preemptions, uint64(0))
	assert.Greater(t, sent, uint64(0))
	require.NoError(t, e.Stop())
	require.NoError(t, run.Wait(context.Background()))
}

// Clock-checked slices: a C kernel with preemption points shares its loop
// with short requests; they complete while it spins, and no signal is sent.
func TestExecPreemptCoop(t *testing.T) {
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	assert.False(t, e.PreemptCoop())
	require.NoError(t, e.SetPreemptCoop(true))
	assert.True(t, e.PreemptCoop())
	require.NoError(t, e.SetPreempt(200*time.Microsecond))
	e.SetServiceMode(true)
	st0, _ := PreemptStatsGlobal()
	run, err := e.Start()
	require.NoError(t, err)
	assert.ErrorIs(t, e.SetPreemptCoop(false), ErrAgain)

	stop := ctest.NewFlag()
	defer stop.Free()
	spin := shortsBesideKernel(t, e, ctest.CoopSpinFn(), stop)
	stop.Set()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := spin.Wait(ctx)
	require.NoError(t, err)
	assert.Greater(t, v, int64(1), "the kernel yielded at slice ends")
	st1, _ := PreemptStatsGlobal()
	assert.Equal(t, st0.Signals, st1.Signals, "no signal on a clock-checked carrier")
	assert.Equal(t, st0.TimerArms, st1.TimerArms)
	require.NoError(t, e.Stop())
	require.NoError(t, run.Wait(context.Background()))
	var nilExec *Exec
	assert.ErrorIs(t, nilExec.SetPreemptCoop(true), ErrInval)
}

// A Go callback that runs long on a carrier with a 200 us slice receives no
// preemption signal and is never preempted (the tick net's one expiry in
// it, at a kernel tick, only stops the tick net until it returns).
func TestPreemptNoSignalDuringGoCallback(t *testing.T) {
	e, err := ExecInit(1)
	require.NoError(t, err)
	defer e.Fini()
	require.NoError(t, e.SetPreempt(200*time.Microsecond))
	e.SetServiceMode(true)
	PreemptSetInvoluntary(true)
	defer PreemptSetInvoluntary(false)
	run, err := e.Start()
	require.NoError(t, err)
	st0, sent0 := PreemptStatsGlobal()
	done := make(chan struct{})
	require.NoError(t, e.Submit(0, func() {
		t0 := time.Now()
		for time.Since(t0) < 20*time.Millisecond {
		}
		close(done)
	}))
	<-done
	st1, sent1 := PreemptStatsGlobal()
	assert.Equal(t, sent0, sent1)
	assert.Equal(t, st0.Preemptions, st1.Preemptions)
	assert.Equal(t, st0.TickNets, st1.TickNets)
	require.NoError(t, e.Stop())
	require.NoError(t, run.Wait(context.Background()))
}

// A service whose C kernels carry preemption points (xtc_yield_if_due in
// their loops) slices them without any interrupt: the executor's slices
// are clock-checked, so a request submitted while a kernel runs is served
// at the kernel's next slice end, and no signal is ever sent.
func ExampleWithClockCheckedPreempt() {
	e, _ := NewExec(1, WithClockCheckedPreempt(200*time.Microsecond))
	defer e.Close()
	_, sent0 := PreemptStatsGlobal()
	_, _ = e.Start()

	stop := ctest.NewFlag()
	defer stop.Free()
	started := ctest.Starts()
	kernel, _ := Dispatch(e.Loop(0), ctest.CoopSpinFn(), stop.Ptr()) // runs until stopped
	for ctest.Starts() == started {
		time.Sleep(100 * time.Microsecond) // until the kernel owns the loop
	}
	short, _ := Dispatch(e.Loop(0), ctest.ShortFn(), nil)
	v, err := short.Wait(context.Background())
	fmt.Println("short request:", v, err, "kernel still running:", !kernel.Ready())

	stop.Set()
	yields, _ := kernel.Wait(context.Background())
	_, sent1 := PreemptStatsGlobal()
	fmt.Println("kernel yielded at slice ends:", yields > 1, "signals sent:", sent1-sent0)
	// Output:
	// short request: 7 <nil> kernel still running: true
	// kernel yielded at slice ends: true signals sent: 0
}
