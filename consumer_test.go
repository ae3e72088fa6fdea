//go:build cgo

package xtc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The consuming module: its own cgo preamble includes <xtc.h> through the
// documented CGO_CFLAGS recipe (csrc/include's directory), defines a
// cooperative kernel that calls the runtime, and hands one static function
// to xtc through a getter (the idiom that links), one through the typed
// getter XTC_GO_FUNC makes (xtc.CFunc), and one non-static function
// directly as C.name.
const consumerMain = `package main

/*
#include <stdint.h>
#include <xtc.h>
#include <xtc_exec.h> // XTC_GO_FUNC

// static: unsafe.Pointer(C.count_static) would fail at link time (cgo
// takes the address of a static function from another C file); a getter
// returning it works.
static intptr_t count_static(void *arg)
{
	intptr_t n = (intptr_t)arg, s = 0;
	for (intptr_t i = 0; i < n; i++) {
		s += i;
		if ((i & 1023) == 0)
			xtc_yield_if_due(); // a header of the runtime, no copied prototype
	}
	xtc_preempt_disable();
	s += 1;
	xtc_preempt_enable();
	return s;
}
static void *count_static_fn(void) { return (void *)count_static; }

// the typed getter: the build fails here if the shape is not
// intptr_t f(void *)
static intptr_t triple(void *arg) { return 3 * (intptr_t)arg; }
XTC_GO_FUNC(triple)

// not static: C.twice can be passed as is
intptr_t twice(void *arg) { return 2 * (intptr_t)arg; }
*/
import "C"

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/xtc-go/xtc"
)

func main() {
	e, err := xtc.NewExec(1)
	if err != nil {
		panic(err)
	}
	defer e.Close()
	if _, err := e.Start(); err != nil {
		panic(err)
	}
	a, err := e.GoInt(context.Background(), C.count_static_fn(), 100)
	if err != nil {
		panic(err)
	}
	b, err := e.GoInt(context.Background(), unsafe.Pointer(C.twice), 21)
	if err != nil {
		panic(err)
	}
	c, err := e.CallInt(context.Background(), xtc.CFuncOf(C.triple_cfunc()), 5)
	if err != nil {
		panic(err)
	}
	fmt.Println(a, b, c)
}
`

func TestConsumerModuleUsesHeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module (about a minute cold)")
	}
	m := newConsumerMod(t, consumerMain)
	run := func(env []string, args ...string) string {
		out, err := m.goCmd(env, args...)
		require.NoError(t, err, "go %v:\n%s", args, out)
		return strings.TrimSpace(out)
	}
	inc := run(nil, "list", "-f", "{{.Dir}}", "github.com/xtc-go/xtc/csrc/include")
	assert.FileExists(t, filepath.Join(inc, "xtc.h"))
	cflags := run(nil, "env", "CGO_CFLAGS") + " -I" + inc
	bin := filepath.Join(m.dir, "consumer")
	run([]string{"CGO_CFLAGS=" + cflags}, "build", "-o", bin, ".")
	out, err := exec.Command(bin).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "4951 42 15", strings.TrimSpace(string(out)))
	// the library's own module graph: no plotting modules
	graph := run(nil, "list", "-m", "all")
	assert.NotContains(t, graph, "gonum")
	assert.NotContains(t, graph, "fpdf")
}

// consumerMod is a scratch module that consumes this one (the consumer
// tests here and in build_consumer_test.go).
type consumerMod struct {
	t   *testing.T
	dir string
	gob string
}

// newConsumerMod writes a module that requires this one (replaced by this
// checkout) with mainSrc as its main.go and the library's go.sum (its
// test-only deps), so no lookup is needed, and tidies it offline.
func newConsumerMod(t *testing.T, mainSrc string) *consumerMod {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()
	gomod := "module example.com/consumer\n\ngo 1.26\n\nrequire github.com/xtc-go/xtc v0.0.0\n\n" +
		"replace github.com/xtc-go/xtc => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(mainSrc), 0o644))
	sum, err := os.ReadFile("go.sum")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	m := &consumerMod{t: t, dir: dir, gob: goBin}
	_, err = m.goCmd(nil, "mod", "tidy")
	require.NoError(t, err)
	return m
}

func (m *consumerMod) goCmd(env []string, args ...string) (string, error) {
	cmd := exec.Command(m.gob, args...)
	cmd.Dir = m.dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (m *consumerMod) build(name string, env []string, args ...string) string {
	bin := filepath.Join(m.dir, name)
	out, err := m.goCmd(env, append(append([]string{"build", "-o", bin}, args...), ".")...)
	require.NoError(m.t, err, "%s", out)
	return bin
}
