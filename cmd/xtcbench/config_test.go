package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parse(t *testing.T, args ...string) (*Config, error, string) {
	t.Helper()
	var buf bytes.Buffer
	c, err := parseConfig(args, &buf)
	return c, err, buf.String()
}

func TestParseDefaultsAreShort(t *testing.T) {
	c, err, _ := parse(t)
	require.NoError(t, err)
	assert.Equal(t, "short", c.Mode)
	assert.Equal(t, WorkloadNames, c.Workloads)
	assert.Equal(t, DistNames, c.Dists)
	assert.Equal(t, []float64{0.1, 0.3, 0.5, 0.7, 0.9}, c.Loads)
	assert.Equal(t, 200*time.Millisecond, c.Point)
	assert.GreaterOrEqual(t, c.Carriers, 1)
	assert.Equal(t, "xtcbench-out", c.Out)
	assert.True(t, c.Plots)

	s, err, _ := parse(t, "--short")
	require.NoError(t, err)
	assert.Equal(t, c, s)
}

func TestParseFull(t *testing.T) {
	c, err, _ := parse(t, "--full")
	require.NoError(t, err)
	assert.Equal(t, "full", c.Mode)
	assert.Len(t, c.Loads, 9)
	assert.InDelta(t, 0.1, c.Loads[0], 1e-12)
	assert.InDelta(t, 0.9, c.Loads[8], 1e-12)
	assert.Equal(t, 2*time.Second, c.Point)
	assert.Equal(t, 10*time.Second, c.FairDur)
}

func TestParseOverridesWinOverMode(t *testing.T) {
	c, err, _ := parse(t, "--full", "--point", "30ms", "--loads", "90, 20,50%",
		"--only", "hog,Micro", "--dists", "c,a1", "--slices", "10us,1ms",
		"--carriers", "3", "--out", "x/y", "--no-plots", "--seed", "7",
		"--hog-probes", "9", "--hog-slice", "250us", "--fair-dur", "1s",
		"--fair-window", "50ms", "--reps", "2", "--micro-scale", "0.5",
		"--progress", "off", "--go-ingress", "netpoll-sleep")
	require.NoError(t, err)
	assert.Equal(t, "full", c.Mode)
	assert.Equal(t, IngressNetpollSleep, c.GoIngress)
	assert.Equal(t, 30*time.Millisecond, c.Point)
	assert.Equal(t, []float64{0.2, 0.5, 0.9}, c.Loads)
	assert.Equal(t, []string{"micro", "hog"}, c.Workloads)
	assert.Equal(t, []string{"A1", "C"}, c.Dists)
	assert.Equal(t, []time.Duration{10 * time.Microsecond, time.Millisecond}, c.Slices)
	assert.Equal(t, 3, c.Carriers)
	assert.Equal(t, "x/y", c.Out)
	assert.False(t, c.Plots)
	assert.Equal(t, uint64(7), c.Seed)
	assert.Equal(t, 9, c.HogProbes)
	assert.Equal(t, 250*time.Microsecond, c.HogSlice)
	assert.Equal(t, time.Second, c.FairDur)
	assert.Equal(t, 50*time.Millisecond, c.FairWindow)
	assert.Equal(t, 2, c.MicroReps)
	assert.Equal(t, 0.5, c.MicroScale)
	assert.Equal(t, "off", c.Progress)
	assert.True(t, c.has("hog"))
	assert.False(t, c.has("tail"))
	assert.True(t, c.Coop, "the cooperative pair is on by default")
	keys := func(c *Config) (ks []string) {
		for _, x := range contenders(c) {
			ks = append(ks, x.Key)
		}
		return ks
	}
	assert.Contains(t, keys(c), "xtc-10µs-coop", "the first slice, kept by yield points")
	assert.Contains(t, keys(c), "go-gosched")
	c2, err, _ := parse(t, "--coop=false")
	require.NoError(t, err)
	assert.NotContains(t, keys(c2), "go-gosched")
}

func TestParseErrors(t *testing.T) {
	cases := map[string][]string{
		"exclusive modes":   {"--short", "--full"},
		"unknown workload":  {"--only", "micro,nope"},
		"empty workloads":   {"--only", ","},
		"unknown dist":      {"--dists", "A3"},
		"zero load":         {"--loads", "0"},
		"load too high":     {"--loads", "250"},
		"load not a number": {"--loads", "ten"},
		"bad slice":         {"--slices", "fast"},
		"slice too small":   {"--slices", "10ns"},
		"carriers 0":        {"--carriers", "0"},
		"negative point":    {"--point", "-1s"},
		"window > run":      {"--fair-dur", "100ms", "--fair-window", "1s"},
		"hog probes 0":      {"--hog-probes", "0"},
		"reps 0":            {"--reps", "0"},
		"bad progress":      {"--progress", "sometimes"},
		"empty out":         {"--out", ""},
		"stray argument":    {"extra"},
		"unknown flag":      {"--nope"},
		"unknown ingress":   {"--go-ingress", "carrier-pigeon"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			_, err, _ := parse(t, args...)
			assert.Error(t, err)
		})
	}
}

func TestHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help"} {
		_, err, out := parse(t, h)
		assert.True(t, errors.Is(err, flag.ErrHelp))
		assert.Contains(t, out, "Usage: xtcbench")
		assert.Contains(t, out, "-full")
		assert.Contains(t, out, "-only")
	}
	var so, se bytes.Buffer
	assert.Equal(t, 0, run([]string{"--help"}, &so, &se))
	assert.True(t, strings.Contains(se.String(), "Workloads"))
	assert.Equal(t, 2, run([]string{"--bogus"}, &so, &se))
}
