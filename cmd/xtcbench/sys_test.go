package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

func TestSysHelpers(t *testing.T) {
	// the allowed CPUs: as many as the Go runtime counts (it reads the
	// same affinity mask)
	aff := affinityCPUs()
	assert.NotEqual(t, "unknown", aff)
	var set unix.CPUSet
	assert.NoError(t, unix.SchedGetaffinity(0, &set))
	assert.Equal(t, runtime.NumCPU(), set.Count())
	n := 0
	for _, p := range strings.Split(aff, ",") {
		var a, b int
		if k, _ := fmtSscanRange(p, &a, &b); k == 2 {
			n += b - a + 1
		} else {
			n++
		}
	}
	assert.Equal(t, set.Count(), n, aff)

	// CPU time only grows
	p0 := processCPU()
	x := uint64(1)
	for i := 0; i < 20_000_000; i++ {
		x = x*6364136223846793005 + 1
	}
	assert.GreaterOrEqual(t, processCPU(), p0, x)

	nv := niceValue()
	assert.True(t, nv >= -20 && nv <= 19, nv)
}

func fmtSscanRange(s string, a, b *int) (int, error) { return fmt.Sscanf(s, "%d-%d", a, b) }
