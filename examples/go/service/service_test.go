package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc"
)

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
	return &client{base: base, max: max, hc: &http.Client{Timeout: 60 * time.Second}}
}

func (c *client) get(path string) (int, string, error) {
	c.mu.Lock()
	if c.sent >= c.max {
		c.mu.Unlock()
		return 0, "", fmt.Errorf("request cap %d reached", c.max)
	}
	c.sent++
	c.mu.Unlock()
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}

// newTestService starts the service behind an httptest server; cleanup
// shuts both down (unless the test did) and checks /sum's C memory.
func newTestService(t *testing.T, cfg Config) (*service, *client, *httptest.Server) {
	s, err := newService(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(s.handler())
	before := sumCounters()
	t.Cleanup(func() {
		ts.Close()
		err := s.Shutdown(context.Background())
		if err != nil {
			assert.ErrorIs(t, err, xtc.ErrClosed) // the test shut it down itself
		}
		m := sumCounters()
		assert.Equal(t, m.Allocs-before.Allocs, m.Frees-before.Frees, "every C argument released")
		assert.Zero(t, m.BadFrees, "no argument released twice")
		assert.Zero(t, m.DeadReads, "no kernel read a released argument")
	})
	return s, newClient(t, ts.URL, 5000), ts
}

func testConfig() Config {
	c := DefaultConfig
	c.StallBudget = 0 // a loaded CI machine would log stalls
	return c
}

func TestFastAndSumAnswer(t *testing.T) {
	_, c, _ := newTestService(t, testConfig())
	for _, n := range []int64{0, 1, 3000, 123457} {
		code, body, err := c.get("/fast?n=" + strconv.FormatInt(n, 10))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, strconv.FormatInt(crunchDirect(n), 10), body)

		code, body, err = c.get("/sum?passes=3&n=" + strconv.FormatInt(n, 10))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
		assert.Equal(t, strconv.FormatInt(sumDirect(n, 3), 10), body)
	}
	code, _, err := c.get("/fast?n=x")
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, code)
}

// /slow past its deadline answers 504 and its kernel stops: the bulk
// class's CPU goes flat while a /fast request is served next to it.
func TestSlowDeadlineStopsKernel(t *testing.T) {
	s, c, _ := newTestService(t, testConfig())
	for rep := 0; rep < 3; rep++ {
		code, body, err := c.get("/slow?n=100000000000")
		require.NoError(t, err)
		require.Equal(t, http.StatusGatewayTimeout, code, body)
		// Go returned only once the kernel's proc was gone: no call left
		st, err := s.e.Stats()
		require.NoError(t, err)
		assert.Zero(t, st.Calls, "the killed kernel's call is over when the handler answers")
		cpu := flatCPU(t, s.bulk)
		code, _, err = c.get("/fast")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, cpu, s.bulk.CPU(), "the killed kernel used no more CPU")
	}
}

// flatCPU waits until c's CPU counter stops moving (the last slice of a
// killed run is charged when its carrier next switches) and returns it.
func flatCPU(t *testing.T, c *xtc.Class) time.Duration {
	var last time.Duration = -1
	require.Eventually(t, func() bool {
		v := c.CPU()
		flat := v == last
		last = v
		return flat
	}, 30*time.Second, 20*time.Millisecond)
	return last
}

// /slow next to /fast: preemption lets short requests through while
// never-yielding kernels hold the only carrier. Progress, not timing: with
// preemption broken no /fast could finish before the slow kernels end.
func TestFastBesideSlow(t *testing.T) {
	_, c, _ := newTestService(t, testConfig())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, _, err := c.get("/slow?n=100000000000"); err != nil {
					return
				}
			}
		}()
	}
	ok := 0
	for i := 0; i < 50; i++ {
		code, _, err := c.get("/fast")
		require.NoError(t, err)
		if code == http.StatusOK {
			ok++
		}
	}
	cancel()
	wg.Wait()
	assert.Equal(t, 50, ok)
}

// /batch from many handlers at once: every request gets its own tokens
// (the answer depends only on its seed and length), and the group batched
// them (more than one member per vector at its peak).
func TestBatchOnExecutor(t *testing.T) {
	s, c, _ := newTestService(t, testConfig())
	want := func(seed, n int) string {
		x := uint64(seed)
		for i := 0; i < n; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		return strconv.FormatUint(x>>40, 10)
	}
	var wg sync.WaitGroup
	for g := 0; g < 24; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				seed, n := g*100+i+1, 50+g*7+i
				code, body, err := c.get(fmt.Sprintf("/batch?tokens=%d&seed=%d", n, seed))
				if assert.NoError(t, err) && assert.Equal(t, http.StatusOK, code, body) {
					assert.Equal(t, want(seed, n), body)
				}
			}
		}()
	}
	wg.Wait()
	bs, err := s.batch.Stats()
	require.NoError(t, err)
	assert.EqualValues(t, 24*8, bs.CompletedOK)
	assert.Greater(t, bs.PeakActive, uint64(1), "requests shared iterations")
	code, body, err := c.get("/stats")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	var st xtc.ExecStats
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.True(t, st.Preempt.Involuntary)
	assert.Equal(t, 1, st.Batches)
	assert.Len(t, st.Classes, 2)
}

// /sum with deadlines that kill the kernel mid-array, from many handlers:
// every C argument is released exactly once, after its kernel stopped
// (the cleanup checks the counters).
func TestSumReleasedOnceUnderKills(t *testing.T) {
	_, c, _ := newTestService(t, testConfig())
	var wg sync.WaitGroup
	codes := make(chan int, 200)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				path := "/sum?n=100000&passes=1000000&timeout=2ms" // killed
				if i%3 == 0 {
					path = "/sum?n=1000" // finishes
				}
				code, _, err := c.get(path)
				if assert.NoError(t, err) {
					codes <- code
				}
			}
		}()
	}
	wg.Wait()
	close(codes)
	seen := map[int]int{}
	for code := range codes {
		seen[code]++
	}
	assert.Equal(t, 80, seen[http.StatusOK]+seen[http.StatusGatewayTimeout], "%v", seen)
	assert.Positive(t, seen[http.StatusGatewayTimeout], "some kernels were killed: %v", seen)
}

// SIGTERM's path with work in flight: the listener stops, the handlers in
// flight finish (batch requests drain, slow kernels end at their
// deadline), the executor shuts down, and nothing is left behind: every
// request got an answer, new ones are refused, the C memory balances.
func TestGracefulShutdownWithWorkInFlight(t *testing.T) {
	s, _, _ := newTestService(t, testConfig())
	// the command's own server, as main runs it
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var entered atomic.Int64 // handlers that began (a request still in the
	// accept queue when the listener closes is reset: not what is tested)
	h := s.handler()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		h.ServeHTTP(w, r)
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c := newClient(t, "http://"+ln.Addr().String(), 100)
	type res struct {
		path string
		code int
		err  error
	}
	out := make(chan res, 21)
	paths := []string{"/batch?tokens=4000", "/slow?n=100000000000", "/sum?n=100000&passes=2000", "/fast", "/batch?tokens=300"}
	var wg sync.WaitGroup
	for i := 0; i < 21; i++ {
		wg.Add(1)
		p := paths[i%len(paths)]
		if i == 20 { // outlives the server's grace period: killed by e.Shutdown
			p = "/sum?n=100000&passes=100000000"
		}
		go func() {
			defer wg.Done()
			code, _, err := c.get(p)
			out <- res{p, code, err}
		}()
	}
	// wait until every request is being handled and work is in flight:
	// batch members and calls
	require.Eventually(t, func() bool {
		st, err := s.e.Stats()
		bs, berr := s.batch.Stats()
		return entered.Load() == 21 && err == nil && berr == nil && st.Calls > 0 && bs.Active > 0
	}, 30*time.Second, time.Millisecond)

	// main's sequence: the listener stops and the handlers in flight get a
	// grace period; then the executor shuts down with what is left (the
	// long /sum), which it kills: its handler answers 503.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err = srv.Shutdown(ctx)
	require.ErrorIs(t, <-served, http.ErrServerClosed)
	if err != nil {
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	err = s.Shutdown(ctx)
	if err != nil {
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	wg.Wait()
	close(out)
	for r := range out {
		if assert.NoError(t, r.err, r.path) {
			assert.Contains(t, []int{http.StatusOK, http.StatusGatewayTimeout, http.StatusServiceUnavailable},
				r.code, r.path)
		}
	}
	_, err = s.e.GoInt(context.Background(), nil, 0)
	assert.ErrorIs(t, err, xtc.ErrClosed)
	_, err = s.batch.Do(context.Background(), &genReq{want: 1})
	assert.ErrorIs(t, err, xtc.ErrClosed)
	_, err = s.e.Stats()
	assert.ErrorIs(t, err, xtc.ErrClosed)
}
