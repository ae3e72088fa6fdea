package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Pure formatting: the figures are made up, nothing is timed.
func sampleFloor() *Floor {
	return &Floor{Samples: 300, Signal: 41, SyscallNs: 1090, SelfSignalUs: 4.7,
		TimerLateP50: 43, TimerLateP99: 61, TimerStall: 42, ArmNearUs: 17,
		ArmFarUs: 3.7, Cross: true, CrossSignalP50Us: 53, CrossStallP50Us: 30}
}

func TestWriteFloorStatesFiguresAndBound(t *testing.T) {
	var b bytes.Buffer
	writeFloor(&b, sampleFloor())
	s := b.String()
	for _, want := range []string{"**Preemption floor of this machine**",
		"300 samples", "1.09 µs", "4.7 µs", "43 µs late", "p99 61 µs",
		"takes 42 µs", "earliest costs 17.0 µs", "later one 3.7 µs",
		"after 53 µs", "takes 30 µs from the thread",
		"(42 µs stall) plus a near re-arm (17 µs), 59 µs", "~236 µs"} {
		assert.Contains(t, s, want)
	}
	// one paragraph: a single line ended by a blank line
	assert.Equal(t, 1, strings.Count(strings.TrimRight(s, "\n"), "\n")+1)
	assert.True(t, strings.HasSuffix(s, ".\n\n"))
}

func TestWriteFloorWithoutSecondCPU(t *testing.T) {
	f := sampleFloor()
	f.Cross, f.CrossSignalP50Us, f.CrossStallP50Us = false, 0, 0
	var b bytes.Buffer
	writeFloor(&b, f)
	assert.Contains(t, b.String(), "cross-CPU signal was not measured")
	assert.NotContains(t, b.String(), "another CPU")

	js, err := json.Marshal(f)
	require.NoError(t, err)
	assert.NotContains(t, string(js), "cross_signal_p50_us")
	assert.Contains(t, string(js), `"cross_cpu":false`)
}

func TestWriteFloorNil(t *testing.T) {
	var b bytes.Buffer
	writeFloor(&b, nil)
	assert.Contains(t, b.String(), "not measured")
}

// Runs the real probes and prints the paragraph; only on request
// (XTCBENCH_FLOOR=1), and it checks that they ran, never what they took.
func TestMeasureFloorSmoke(t *testing.T) {
	if os.Getenv("XTCBENCH_FLOOR") == "" {
		t.Skip("set XTCBENCH_FLOOR=1 to run the floor probes")
	}
	f, err := measureFloor()
	require.NoError(t, err)
	assert.Equal(t, 300, f.Samples)
	js, err := json.Marshal(f)
	require.NoError(t, err)
	t.Logf("%s", js)
	var b bytes.Buffer
	writeFloor(&b, f)
	t.Log(b.String())
}
