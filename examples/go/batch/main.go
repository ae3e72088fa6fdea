// Command batch serves a skewed stream of "decode" requests with an
// xtc.Batch continuous-batching group and compares it with static
// batching of the same requests.
//
// Each request needs some rounds of a shared step (think: tokens of an
// LLM decode); one step advances every active request by one round and
// costs a fixed part plus a per-member part, so a vector step is cheaper
// than one step per request. Continuous batching refills a finished
// member's slot at the next iteration boundary; static batching admits a
// cohort and waits for its longest member. Requests are Go values; Step
// and Complete are Go functions run on the loop's thread.
//
//	go run ./examples/go/batch
package main

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"time"

	"github.com/xtc-go/xtc"
)

const (
	maxActive = 16
	nReq      = 200
	stepFixed = 200 * time.Microsecond // per step
	stepPer   = 10 * time.Microsecond  // per member
)

type request struct {
	id, rounds, need int
	done             time.Duration
}

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

func workload() []*request {
	rng := rand.New(rand.NewSource(7))
	rs := make([]*request, nReq)
	for i := range rs {
		need := 1 + rng.Intn(8) // mostly short...
		if rng.Intn(10) == 0 {
			need = 64 + rng.Intn(64) // ...a few long
		}
		rs[i] = &request{id: i, need: need}
	}
	return rs
}

func continuous(rs []*request) (time.Duration, error) {
	loop, err := xtc.LoopInit()
	if err != nil {
		return 0, err
	}
	defer loop.Fini()
	var t0 time.Time
	b, err := xtc.BatchCreate(loop, &xtc.BatchOpts{
		Capacity: len(rs), MaxActive: maxActive, ResourceCapacity: maxActive,
		Step: func(items []xtc.BatchItem, res []xtc.BatchResult) error {
			spin(stepFixed + time.Duration(len(items))*stepPer)
			for i, it := range items {
				r := it.Request.(*request)
				if r.rounds++; r.rounds == r.need {
					res[i].State = xtc.BatchDone
				}
			}
			return nil
		},
		Complete: func(h uint64, req any, outcome error) {
			req.(*request).done = time.Since(t0)
		},
	})
	if err != nil {
		return 0, err
	}
	for _, r := range rs {
		if _, err := b.Submit(r, 1); err != nil {
			return 0, err
		}
	}
	xtc.BatchClose(b, xtc.BatchDrain)
	t0 = time.Now()
	if err := loop.Run(); err != nil {
		return 0, err
	}
	total := time.Since(t0)
	st, _ := b.Stats()
	fmt.Printf("continuous: %d iterations, %d member-rounds (%.1f members per step)\n",
		st.Iterations, st.MemberRounds, float64(st.MemberRounds)/float64(st.Iterations))
	return total, b.Destroy()
}

func static(rs []*request) time.Duration {
	t0 := time.Now()
	iters := 0
	for base := 0; base < len(rs); base += maxActive {
		cohort := rs[base:min(base+maxActive, len(rs))]
		for live := len(cohort); live > 0; {
			spin(stepFixed + time.Duration(live)*stepPer)
			iters++
			for _, r := range cohort {
				if r.rounds < r.need {
					if r.rounds++; r.rounds == r.need {
						r.done = time.Since(t0)
						live--
					}
				}
			}
		}
	}
	fmt.Printf("static:     %d iterations\n", iters)
	return time.Since(t0)
}

func shortP99(rs []*request) time.Duration {
	var v []time.Duration
	for _, r := range rs {
		if r.need <= 8 {
			v = append(v, r.done)
		}
	}
	sort.Slice(v, func(a, b int) bool { return v[a] < v[b] })
	return v[len(v)*99/100]
}

func main() {
	a, b := workload(), workload()
	tc, err := continuous(a)
	if err != nil {
		if errors.Is(err, xtc.ErrNosys) {
			fmt.Println("batching not built:", err)
			return
		}
		fmt.Fprintln(os.Stderr, "batch:", err)
		os.Exit(1)
	}
	ts := static(b)
	fmt.Printf("throughput: continuous %.0f req/s, static %.0f req/s (%.1fx)\n",
		nReq/tc.Seconds(), nReq/ts.Seconds(), ts.Seconds()/tc.Seconds())
	fmt.Printf("short requests p99: continuous %v, static %v\n",
		shortP99(a).Round(time.Millisecond), shortP99(b).Round(time.Millisecond))
}
