package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
)

const slice = 200 * time.Microsecond

// client is the bounded loopback load client: it talks only to 127.0.0.1
// and refuses to send more than max requests.
type client struct {
	base string
	max  int
	mu   sync.Mutex
	sent int
	hc   *http.Client
}

func newClient(t *testing.T, base string, max int) *client {
	host, _, err := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host, "loopback targets only")
	return &client{base: base, max: max, hc: &http.Client{Timeout: 30 * time.Second}}
}

func (c *client) get(path string) (int, string, time.Duration, error) {
	c.mu.Lock()
	if c.sent >= c.max {
		c.mu.Unlock()
		return 0, "", 0, fmt.Errorf("request cap %d reached", c.max)
	}
	c.sent++
	c.mu.Unlock()
	t0 := time.Now()
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		return 0, "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), time.Since(t0), err
}

func newTestService(t *testing.T, stall time.Duration) (*service, *client) {
	s, err := newService(slice, stall)
	require.NoError(t, err)
	ts := httptest.NewServer(s.handler())
	t.Cleanup(func() {
		ts.Close()
		assert.NoError(t, s.Close())
	})
	return s, newClient(t, ts.URL, 2000)
}

func TestServiceAnswers(t *testing.T) {
	_, c := newTestService(t, 0)
	for _, n := range []int64{0, 1, 1000, 123457} {
		for _, cls := range []string{"interactive", "batch"} {
			code, body, _, err := c.get("/work?class=" + cls + "&n=" + strconv.FormatInt(n, 10))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, code, body)
			assert.Equal(t, strconv.FormatInt(crunchDirect(n), 10), body)
		}
	}
	code, _, _, err := c.get("/work?class=nope&n=1")
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, code)
}

// A request whose deadline passes answers 504, and its kernel stops
// consuming CPU: the batch class's counter goes flat, and the loop's
// last-run record says when the kernel's run ended, against the deadline
// (what the client asked) and in slices.
func TestServiceDeadlineStopsKernel(t *testing.T) {
	s, c := newTestService(t, time.Hour) // a budget only to keep the run record
	var past []float64
	for rep := 0; rep < 5; rep++ {
		start := xtc.ClockMono()
		code, _, _, err := c.get("/work?class=batch&n=100000000000&timeout=30ms")
		require.NoError(t, err)
		assert.Equal(t, http.StatusGatewayTimeout, code)
		r := waitRunOver(t, s.e.Loop(0))
		requireBecomesFlat(t, s.batch.CPU)
		past = append(past, float64(r.Started+r.Ran-(start+30*time.Millisecond))/float64(slice))
	}
	sort.Float64s(past)
	t.Logf("kernel's run ended past the 30 ms deadline by: median %.1f slices of %v (min %.1f, max %.1f, 5 runs; includes Go's timer and HTTP path)",
		past[2], slice, past[0], past[4])

	// The same kill without the HTTP path, measured from the moment the
	// ctx ended (the kill is issued then): what the runtime itself adds.
	// The figure above is larger mostly because its reference point is
	// the client's send, not the handler's timer start, so it includes
	// the request's way in and the Go timer's lateness.
	var afterKill []float64
	for rep := 0; rep < 5; rep++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		var killAt time.Duration
		var mu sync.Mutex
		context.AfterFunc(ctx, func() { mu.Lock(); killAt = xtc.ClockMono(); mu.Unlock() })
		_, err := s.run(ctx, s.batch, 100000000000)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		r := waitRunOver(t, s.e.Loop(0))
		mu.Lock()
		afterKill = append(afterKill, float64(r.Started+r.Ran-killAt)/float64(slice))
		mu.Unlock()
	}
	sort.Float64s(afterKill)
	t.Logf("kernel's run ended after the kill (ctx end, no HTTP) by: median %.2f slices of %v (min %.2f, max %.2f, 5 runs)",
		afterKill[2], slice, afterKill[0], afterKill[4])
}

// Two always-busy kernels per class: the CPU splits about 3:1; the
// interactive p50/p99 next to two never-yielding batch kernels.
func TestServiceSharesAndLatency(t *testing.T) {
	s, c := newTestService(t, 20*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	hog := func(cls string) {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, _, _, err := c.get("/work?class=" + cls + "&n=4000000000&timeout=3s"); err != nil {
				return
			}
		}
	}
	// shares: two hogs in each class
	for i := 0; i < 2; i++ {
		wg.Add(2)
		go hog("interactive")
		go hog("batch")
	}
	time.Sleep(100 * time.Millisecond)
	var ratios []float64
	var sumI, sumB time.Duration
	for w := 0; w < 5; w++ {
		i0, b0 := s.inter.CPU(), s.batch.CPU()
		time.Sleep(400 * time.Millisecond)
		di, db := s.inter.CPU()-i0, s.batch.CPU()-b0
		sumI, sumB = sumI+di, sumB+db
		ratios = append(ratios, float64(di)/float64(db))
	}
	cancel()
	wg.Wait()
	sort.Float64s(ratios)
	t.Logf("shares 300:100 under load, 5 windows of 400 ms: ratio median %.2f (min %.2f, max %.2f; whole 2 s %.2f; target 3 +-5%%)",
		ratios[2], ratios[0], ratios[4], float64(sumI)/float64(sumB))
	assert.Greater(t, sumI, sumB)

	// latency: two never-yielding batch kernels, short interactive requests
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, _, _, err := c.get("/work?class=batch&n=2000000000&timeout=2s"); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	var lat []time.Duration
	errs := 0
	for i := 0; i < 200; i++ {
		code, _, d, err := c.get("/work?class=interactive&n=20000")
		if err != nil || code != http.StatusOK {
			errs++
			continue
		}
		lat = append(lat, d)
	}
	cancel()
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	require.NotEmpty(t, lat)
	t.Logf("interactive next to 2 never-yielding batch kernels: n=%d p50 %v p99 %v max %v, %d errors",
		len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], errs)
	// Progress, not timing: with preemption broken no interactive request
	// would get the carrier before its deadline (lat would be empty). How
	// many met their 100 ms deadline depends on the machine (a stalled
	// guest once failed 79 of 200 here), so it is logged, not asserted.
	if errs > 0 {
		t.Logf("%d interactive requests missed their deadline (machine load)", errs)
	}

	// a stall report, when there is one, names the batch kernel. With the
	// carrier-owned slice timers every run is cut at the 200 us slice, so
	// on a quiet machine no run reaches the 20 ms budget and none comes;
	// the in-flight report itself is tested in the xtc package
	// (TestCallbackPanicEachKind, the stall tests).
	if r := s.lastStall.Load(); r != nil {
		assert.Equal(t, "crunch", r.Name)
		assert.False(t, r.Pid.IsNone())
	} else {
		t.Logf("no run exceeded the stall budget (preemption cut every run)")
	}
}

// The executor shuts down like net/http: afterwards calls are refused.
func TestServiceShutdown(t *testing.T) {
	s, err := newService(slice, 0)
	require.NoError(t, err)
	ts := httptest.NewServer(s.handler())
	defer ts.Close()
	c := newClient(t, ts.URL, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.e.Shutdown(ctx))
	code, _, _, err := c.get("/work?n=1")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
}

// waitRunOver waits (bounded) until the loop's run record shows no run in
// flight, i.e. the killed kernel's run is over, and returns that record.
func waitRunOver(t *testing.T, l *xtc.Loop) xtc.StallReport {
	t.Helper()
	var r xtc.StallReport
	var err error
	for i := 0; i < 2500; i++ {
		if r, err = l.StallInFlight(); err == nil && !r.InFlight {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	require.False(t, r.InFlight, "the killed kernel still runs")
	return r
}

// requireBecomesFlat: a class counter is charged at run end, and the exit
// path's last dispatch may be charged just after the run record closed; a
// kernel that kept running would never let two reads 10 ms apart agree.
func requireBecomesFlat(t *testing.T, cpu func() time.Duration) {
	t.Helper()
	flat := false
	for i := 0; i < 100 && !flat; i++ {
		c := cpu()
		time.Sleep(10 * time.Millisecond)
		flat = c == cpu()
	}
	require.True(t, flat, "the killed kernel still runs")
}
