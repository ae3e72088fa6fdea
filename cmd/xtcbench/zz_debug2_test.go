package main

import ("os"; "testing")

func TestDebugExecSpawn(t *testing.T) {
	if os.Getenv("XB_DEBUG") == "" { t.Skip() }
	for _, m := range []int{0, 3, 1, 4} { xbDbg(m, 20000) }
}

func TestDebugHog2(t *testing.T) {
	if os.Getenv("XB_DEBUG") == "" { t.Skip() }
	xbDbgHog(0)
	xbDbgHog(1)
}
