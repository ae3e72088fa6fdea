//go:build cgo

package xtc_test

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
	"github.com/xtc-go/xtc/internal/ctest"
)

func newLoop(t *testing.T) *xtc.Loop {
	t.Helper()
	l, err := xtc.LoopInit()
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Fini() })
	return l
}

// runWithin runs the loop and fails the test if it does not return in d.
func runWithin(t *testing.T, l *xtc.Loop, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = l.Stop()
		t.Fatalf("loop still running after %v", d)
		return nil
	}
}

func TestVersion(t *testing.T) {
	maj, min, pat, err := xtc.VersionComponents()
	require.NoError(t, err)
	assert.Equal(t, xtc.Version(), itoa(maj)+"."+itoa(min)+"."+itoa(pat))
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}

// The Go sentinels and the C strerror come from the same table.
func TestStrerrorMatchesGoErrors(t *testing.T) {
	for _, e := range []xtc.Errno{xtc.ErrInval, xtc.ErrNomem, xtc.ErrNosys, xtc.ErrRange,
		xtc.ErrAgain, xtc.ErrInternal, xtc.ErrResource, xtc.ErrDeadlk, xtc.ErrVersion,
		xtc.ErrAborted, xtc.ErrNotfound, xtc.ErrIo} {
		assert.Equal(t, e.Error(), "xtc: "+xtc.Strerror(e), e.Name())
	}
}

func TestIOBackendName(t *testing.T) {
	assert.Contains(t, []string{"uring", "epoll"}, xtc.IOBackendName())
}

func TestStackSize(t *testing.T) {
	orig := xtc.StackSize()
	require.Greater(t, orig, 0)
	assert.ErrorIs(t, xtc.SetStackSize(-1), xtc.ErrInval)
	assert.Error(t, xtc.SetStackSize(1), "below the 16 KiB minimum")
	require.NoError(t, xtc.SetStackSize(128<<10))
	assert.Equal(t, 128<<10, xtc.StackSize())
	require.NoError(t, xtc.SetStackSize(orig))
	assert.Equal(t, orig, xtc.StackSize())
}

func TestLoopEmptyRunReturns(t *testing.T) {
	l := newLoop(t)
	require.NoError(t, runWithin(t, l, 5*time.Second))
	require.NoError(t, runWithin(t, l, 5*time.Second), "a loop can run again")
}

// Every wrapper refuses a nil loop and a finalised one with ErrInval.
func TestLoopNilAndAfterFini(t *testing.T) {
	l, err := xtc.LoopInit()
	require.NoError(t, err)
	require.NoError(t, l.Fini())

	for name, lp := range map[string]*xtc.Loop{"nil": nil, "after fini": l} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, lp.Run(), xtc.ErrInval)
			assert.ErrorIs(t, lp.Stop(), xtc.ErrInval)
			assert.ErrorIs(t, lp.Wake(), xtc.ErrInval)
			assert.ErrorIs(t, lp.Fini(), xtc.ErrInval)
			assert.ErrorIs(t, lp.SetYieldBudget(time.Millisecond), xtc.ErrInval)
			_, err := lp.YieldDueCount()
			assert.ErrorIs(t, err, xtc.ErrInval)
			_, err = xtc.TaskSpawn(lp, func(*xtc.Task) xtc.TaskResult { return xtc.TaskDone })
			assert.ErrorIs(t, err, xtc.ErrInval)
			_, err = xtc.TimerSet(lp, time.Millisecond, func() {})
			assert.ErrorIs(t, err, xtc.ErrInval)
			_, err = xtc.ProcSpawn(lp, ctest.Noop, nil, nil)
			assert.ErrorIs(t, err, xtc.ErrInval)
			_, err = xtc.ProcSpawn(lp, ctest.Noop, nil, &xtc.ProcOpts{Name: "x"})
			assert.ErrorIs(t, err, xtc.ErrInval)
			assert.NotEmpty(t, lp.String())
		})
	}
}

func TestTaskSpawnGoBody(t *testing.T) {
	l := newLoop(t)
	runs := 0
	_, err := xtc.TaskSpawn(l, func(*xtc.Task) xtc.TaskResult {
		runs++
		if runs < 3 {
			return xtc.TaskResched
		}
		return xtc.TaskDone
	})
	require.NoError(t, err)
	require.NoError(t, runWithin(t, l, 5*time.Second))
	assert.Equal(t, 3, runs)
}

func TestTaskSpawnBadArgs(t *testing.T) {
	l := newLoop(t)
	_, err := xtc.TaskSpawn(l, nil)
	assert.ErrorIs(t, err, xtc.ErrInval)
	var nt *xtc.Task
	assert.ErrorIs(t, nt.ParkOnTimer(time.Millisecond), xtc.ErrInval)
	assert.ErrorIs(t, nt.ParkOnFd(0, xtc.IORead), xtc.ErrInval)
	_, err = nt.Waker()
	assert.ErrorIs(t, err, xtc.ErrInval)
	assert.ErrorIs(t, xtc.Waker{}.Wake(), xtc.ErrInval)
}

func TestTaskParkOnTimer(t *testing.T) {
	l := newLoop(t)
	var start time.Time
	var woke time.Duration
	runs := 0
	_, err := xtc.TaskSpawn(l, func(tk *xtc.Task) xtc.TaskResult {
		runs++
		if runs == 1 {
			start = time.Now()
			if err := tk.ParkOnTimer(2 * time.Millisecond); err != nil {
				t.Error(err)
				return xtc.TaskDone
			}
			return xtc.TaskPending
		}
		woke = time.Since(start)
		return xtc.TaskDone
	})
	require.NoError(t, err)
	require.NoError(t, runWithin(t, l, 5*time.Second))
	assert.Equal(t, 2, runs)
	assert.GreaterOrEqual(t, woke, 2*time.Millisecond, "a timer park never ends early")
}

// A task parked with no timer is woken from another goroutine.
func TestTaskWakerFromGoroutine(t *testing.T) {
	l := newLoop(t)
	wch := make(chan xtc.Waker, 1)
	runs := 0
	_, err := xtc.TaskSpawn(l, func(tk *xtc.Task) xtc.TaskResult {
		runs++
		if runs == 1 {
			w, err := tk.Waker()
			if err != nil {
				t.Error(err)
				return xtc.TaskDone
			}
			wch <- w
			return xtc.TaskPending
		}
		return xtc.TaskDone
	})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w := <-wch
		assert.NoError(t, w.Wake())
		assert.NoError(t, w.Wake(), "wakers are idempotent")
	}()
	require.NoError(t, runWithin(t, l, 5*time.Second))
	wg.Wait() // (the second wake may find the task done: a no-op)
	assert.Equal(t, 2, runs)
}

// A panic in a Go callback stops the loop and resurfaces from Run.
func TestTaskPanicPropagates(t *testing.T) {
	l := newLoop(t)
	_, err := xtc.TaskSpawn(l, func(*xtc.Task) xtc.TaskResult { panic("boom") })
	require.NoError(t, err)
	assert.PanicsWithValue(t, "boom", func() { _ = l.Run() })
	// The loop survives and can be finalised.
	require.NoError(t, l.Fini())
}

// Run and Fini from inside a callback of the same loop are refused; timers
// and spawns from there work directly.
func TestCallsFromInsideCallback(t *testing.T) {
	l := newLoop(t)
	var runErr, finiErr, timerErr, spawnErr error
	fired, spawned := false, false
	_, err := xtc.TaskSpawn(l, func(*xtc.Task) xtc.TaskResult {
		runErr = l.Run()
		finiErr = l.Fini()
		_, timerErr = xtc.TimerSet(l, 0, func() { fired = true })
		_, spawnErr = xtc.TaskSpawn(l, func(*xtc.Task) xtc.TaskResult { spawned = true; return xtc.TaskDone })
		return xtc.TaskDone
	})
	require.NoError(t, err)
	require.NoError(t, runWithin(t, l, 5*time.Second))
	assert.ErrorIs(t, runErr, xtc.ErrInval)
	assert.ErrorIs(t, finiErr, xtc.ErrInval)
	assert.NoError(t, timerErr)
	assert.NoError(t, spawnErr)
	assert.True(t, fired)
	assert.True(t, spawned)
}

func TestStopFromGoroutine(t *testing.T) {
	l := newLoop(t)
	var runs atomic.Int64
	_, err := xtc.TaskSpawn(l, func(*xtc.Task) xtc.TaskResult {
		runs.Add(1)
		return xtc.TaskResched // forever
	})
	require.NoError(t, err)
	go func() {
		for runs.Load() < 100 {
			time.Sleep(time.Millisecond)
		}
		assert.NoError(t, l.Stop())
	}()
	require.NoError(t, runWithin(t, l, 10*time.Second))
	assert.GreaterOrEqual(t, runs.Load(), int64(100))
	assert.NoError(t, l.Wake())
}

func TestTimerFires(t *testing.T) {
	l := newLoop(t)
	start := time.Now()
	var at time.Duration
	tm, err := xtc.TimerSet(l, 3*time.Millisecond, func() { at = time.Since(start) })
	require.NoError(t, err)
	require.NoError(t, runWithin(t, l, 5*time.Second))
	assert.GreaterOrEqual(t, at, 3*time.Millisecond, "fires no earlier than asked")
	assert.NoError(t, tm.Cancel(), "cancel after firing is a no-op")
}

func TestTimerCancel(t *testing.T) {
	l := newLoop(t)
	fired := false
	tm, err := xtc.TimerSet(l, 20*time.Millisecond, func() { fired = true })
	require.NoError(t, err)
	require.NoError(t, tm.Cancel())
	require.NoError(t, tm.Cancel(), "twice is a no-op")
	require.NoError(t, runWithin(t, l, 5*time.Second))
	assert.False(t, fired)
}

func TestTimerBadArgs(t *testing.T) {
	l := newLoop(t)
	_, err := xtc.TimerSet(l, time.Millisecond, nil)
	assert.ErrorIs(t, err, xtc.ErrInval)
	var nt *xtc.Timer
	assert.ErrorIs(t, nt.Cancel(), xtc.ErrInval)

	tm, err := xtc.TimerSet(l, time.Hour, func() {})
	require.NoError(t, err)
	require.NoError(t, l.Fini())
	assert.ErrorIs(t, tm.Cancel(), xtc.ErrInval, "after fini")
}

// Owner-only calls made by another goroutine while the loop runs are
// posted to the loop thread.
func TestTimerSetWhileRunning(t *testing.T) {
	l := newLoop(t)
	var fired atomic.Bool
	// Keep the loop alive until the foreign timer fired.
	_, err := xtc.TaskSpawn(l, func(tk *xtc.Task) xtc.TaskResult {
		if fired.Load() {
			return xtc.TaskDone
		}
		if err := tk.ParkOnTimer(time.Millisecond); err != nil {
			t.Error(err)
			return xtc.TaskDone
		}
		return xtc.TaskPending
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	var setErr, budgetErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, setErr = xtc.TimerSet(l, time.Millisecond, func() { fired.Store(true) })
		budgetErr = l.SetYieldBudget(time.Millisecond)
	}()
	wg.Wait()
	require.NoError(t, setErr)
	require.NoError(t, budgetErr)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		_ = l.Stop()
		t.Fatal("loop did not finish")
	}
	assert.True(t, fired.Load())
	// Run from another goroutine while running is refused.
}

func TestFiniWhileRunningRefused(t *testing.T) {
	l := newLoop(t)
	stop := make(chan struct{})
	var running atomic.Bool
	_, err := xtc.TaskSpawn(l, func(tk *xtc.Task) xtc.TaskResult {
		running.Store(true)
		select {
		case <-stop:
			return xtc.TaskDone
		default:
		}
		_ = tk.ParkOnTimer(time.Millisecond)
		return xtc.TaskPending
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	// Wait until it runs, then try Fini and a second Run from here.
	require.Eventually(t, running.Load, 30*time.Second, 100*time.Microsecond,
		"the loop never ran its task")
	assert.ErrorIs(t, l.Fini(), xtc.ErrInval)
	assert.ErrorIs(t, l.Run(), xtc.ErrInval)
	close(stop)
	require.NoError(t, <-done)
}

func TestSetYieldBudget(t *testing.T) {
	l := newLoop(t)
	require.NoError(t, l.SetYieldBudget(time.Millisecond))
	require.NoError(t, l.SetYieldBudget(-1), "negative counts as off")
	n, err := l.YieldDueCount()
	require.NoError(t, err)
	assert.Equal(t, uint64(0), n)
}

func TestProcSpawnRunsC(t *testing.T) {
	l := newLoop(t)
	c := ctest.NewCell(10)
	defer c.Free()
	pid, err := xtc.ProcSpawn(l, ctest.YieldN, c.Ptr(), &xtc.ProcOpts{Name: "yielder"})
	require.NoError(t, err)
	assert.False(t, pid.IsNone())
	assert.NotEmpty(t, pid.String())
	require.NoError(t, runWithin(t, l, 5*time.Second))
	assert.True(t, c.Done())
	assert.Equal(t, int64(10), c.Sum())
}

func TestProcSpawnBadArgs(t *testing.T) {
	l := newLoop(t)
	_, err := xtc.ProcSpawn(l, nil, nil, nil)
	assert.ErrorIs(t, err, xtc.ErrInval)
	_, err = xtc.ProcSpawn(l, ctest.Noop, nil, &xtc.ProcOpts{MailboxCap: -1})
	assert.ErrorIs(t, err, xtc.ErrInval)
}

func sendInt(t *testing.T, pid xtc.Pid, v int64) {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], uint64(v))
	assert.NoError(t, xtc.Send(pid, b[:]))
}

// Goroutines send to a proc while the loop runs (cross-thread sends).
func TestSendFromGoroutines(t *testing.T) {
	l := newLoop(t)
	c := ctest.NewCell(0)
	defer c.Free()
	pid, err := xtc.ProcSpawn(l, ctest.RecvSum, c.Ptr(), &xtc.ProcOpts{MailboxCap: 1024})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= 100; i++ {
				sendInt(t, pid, int64(i))
			}
		}()
	}
	wg.Wait()
	st, err := xtc.ProcMailboxStats(pid)
	if err == nil {
		assert.Equal(t, 1024, st.Cap)
	}
	require.NoError(t, xtc.Send(pid, nil)) // empty message: stop
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		_ = l.Stop()
		t.Fatal("proc did not finish")
	}
	assert.True(t, c.Done())
	assert.Equal(t, int64(0), c.RC())
	assert.Equal(t, int64(400), c.N())
	assert.Equal(t, int64(4*5050), c.Sum())
	assert.ErrorIs(t, xtc.Send(pid, []byte{1}), xtc.ErrInval, "dead pid")
}

func TestSendToFullMailbox(t *testing.T) {
	l := newLoop(t)
	c := ctest.NewCell(0)
	defer c.Free()
	pid, err := xtc.ProcSpawn(l, ctest.RecvSum, c.Ptr(), &xtc.ProcOpts{MailboxCap: 2})
	require.NoError(t, err)
	// The loop is not running, so nothing is received yet.
	require.NoError(t, xtc.Send(pid, []byte{1}))
	require.NoError(t, xtc.Send(pid, []byte{2}))
	assert.ErrorIs(t, xtc.Send(pid, []byte{3}), xtc.ErrAgain)
	require.NoError(t, xtc.ExitPid(pid, 1))
	require.NoError(t, runWithin(t, l, 5*time.Second))
}

func TestProcSleep(t *testing.T) {
	l := newLoop(t)
	c := ctest.NewCell(int64(2 * time.Millisecond))
	defer c.Free()
	_, err := xtc.ProcSpawn(l, ctest.Sleep, c.Ptr(), nil)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, runWithin(t, l, 5*time.Second))
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Millisecond)
	assert.True(t, c.Done())
	assert.Equal(t, int64(0), c.RC())
}

// ExitPid kills a proc parked in recv; it never reaches the end of its body.
func TestExitPidKillsParkedProc(t *testing.T) {
	l := newLoop(t)
	c := ctest.NewCell(0)
	defer c.Free()
	pid, err := xtc.ProcSpawn(l, ctest.Wait, c.Ptr(), nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	// a kill of a proc that runs (killed before its first run, it would
	// never have waited); it lands in its recv
	require.Eventually(t, c.Waiting, 30*time.Second, 100*time.Microsecond,
		"the proc never ran")
	require.NoError(t, xtc.ExitPid(pid, 7))
	require.NoError(t, xtc.ProcWake(pid), "waking a dying proc is harmless")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		_ = l.Stop()
		t.Fatal("killed proc did not exit")
	}
	assert.False(t, c.Done())
	assert.ErrorIs(t, xtc.ExitPid(pid, 7), xtc.ErrInval, "already dead")
}

func TestProcCallsFromGoAreRefused(t *testing.T) {
	assert.ErrorIs(t, xtc.Send(xtc.PidNone, []byte{1}), xtc.ErrInval)
	assert.ErrorIs(t, xtc.ProcWake(xtc.PidNone), xtc.ErrInval)
	assert.ErrorIs(t, xtc.ExitPid(xtc.PidNone, 0), xtc.ErrInval)
	_, err := xtc.ProcMailboxStats(xtc.PidNone)
	assert.ErrorIs(t, err, xtc.ErrInval)
	// Go never runs on a proc: the calling-proc functions refuse.
	_, err = xtc.Monitor(xtc.Pid{LoopID: 1, LocalID: 1, Gen: 1})
	assert.ErrorIs(t, err, xtc.ErrInval)
	assert.ErrorIs(t, xtc.Link(xtc.Pid{LoopID: 1, LocalID: 1, Gen: 1}), xtc.ErrInval)
	assert.ErrorIs(t, xtc.Unlink(xtc.Pid{LoopID: 1, LocalID: 1, Gen: 1}), xtc.ErrInval)
	assert.Error(t, xtc.Demonitor(12345))
	_, err = xtc.DownDecode(nil)
	assert.ErrorIs(t, err, xtc.ErrInval)
	_, err = xtc.DownDecode([]byte("not a down message at all"))
	assert.ErrorIs(t, err, xtc.ErrInval)
	_, _, err = xtc.ExitDecode(nil)
	assert.ErrorIs(t, err, xtc.ErrInval)
}

func TestErrorsIsAndAs(t *testing.T) {
	_, err := xtc.TaskSpawn(nil, func(*xtc.Task) xtc.TaskResult { return xtc.TaskDone })
	require.Error(t, err)
	assert.True(t, errors.Is(err, xtc.ErrInval))
	var xe *xtc.Error
	require.True(t, errors.As(err, &xe))
	assert.Equal(t, "xtc_task_spawn", xe.Op)
	assert.NotEmpty(t, xtc.LinkInfo)
}

// Go callbacks run with the depth guard raised: the loop refuses fiber
// switches on that thread while Go code runs (README, "Thread rules in a Go
// process").
func TestGoCallbacksRaiseDepthGuard(t *testing.T) {
	l := newLoop(t)
	var taskDepth, timerDepth, yieldRC int
	_, err := xtc.TaskSpawn(l, func(*xtc.Task) xtc.TaskResult {
		taskDepth = ctest.GocbDepth()
		yieldRC = ctest.YieldEx()
		return xtc.TaskDone
	})
	require.NoError(t, err)
	_, err = xtc.TimerSet(l, 0, func() { timerDepth = ctest.GocbDepth() })
	require.NoError(t, err)
	require.NoError(t, runWithin(t, l, 5*time.Second))
	assert.Equal(t, 1, taskDepth)
	assert.Equal(t, 1, timerDepth)
	assert.NotEqual(t, 0, yieldRC, "no yield from inside a Go callback")
}

func TestRunContextCancel(t *testing.T) {
	l := newLoop(t)
	_, err := xtc.TaskSpawn(l, func(tk *xtc.Task) xtc.TaskResult {
		_ = tk.ParkOnTimer(time.Millisecond)
		return xtc.TaskPending // forever
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, l.RunContext(ctx), context.DeadlineExceeded)

	// A context that is never done runs to completion.
	l2 := newLoop(t)
	ran := false
	_, err = xtc.TaskSpawn(l2, func(*xtc.Task) xtc.TaskResult { ran = true; return xtc.TaskDone })
	require.NoError(t, err)
	require.NoError(t, l2.RunContext(context.Background()))
	assert.True(t, ran)
	var nl *xtc.Loop
	assert.ErrorIs(t, nl.RunContext(ctx), xtc.ErrInval)
}
