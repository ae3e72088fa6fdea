//go:build cgo && linux

package xtc

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The builds a consumer module gets (README "Go quick start"): liburing
// linked statically by default (no liburing.so needed at run time), a
// fully static binary, a build without liburing's .pc with -tags
// xtc_nouring, a failure that names the fix without it, and an arm64
// cross build with the cross compiler `make setup` installs.
const buildConsumerMain = `package main

/*
#include <stdint.h>
static intptr_t twice(void *arg) { return 2 * (intptr_t)arg; }
static void *twice_fn(void) { return (void *)twice; }
*/
import "C"

import (
	"context"
	"fmt"

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
	v, err := e.GoInt(context.Background(), C.twice_fn(), 21)
	if err != nil {
		panic(err)
	}
	fmt.Println(v, xtc.LinkInfo)
}
`

// needed returns the binary's DT_NEEDED libraries and whether it has an
// interpreter (is dynamically linked).
func needed(t *testing.T, bin string) ([]string, bool) {
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	dyn := false
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			dyn = true
		}
	}
	return libs, dyn
}

func runConsumer(t *testing.T, bin string, prefix ...string) string {
	args := append(prefix, bin)
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.True(t, strings.HasPrefix(string(out), "42 "), "%s", out)
	return strings.TrimSpace(string(out))
}

// Run by `make go-build-matrix` (part of `make test`) with its own
// timeout: four cold builds take minutes on a loaded 2-vCPU machine.
func TestConsumerBuilds(t *testing.T) {
	if os.Getenv("XTC_BUILD_MATRIX") == "" {
		t.Skip("set XTC_BUILD_MATRIX=1 (make go-build-matrix): builds a consumer module four ways")
	}
	m := newConsumerMod(t, buildConsumerMain)
	uring := !strings.Contains(LinkInfo, "xtc_nouring")

	t.Run("default", func(t *testing.T) {
		bin := m.build("default", nil)
		libs, dyn := needed(t, bin)
		assert.True(t, dyn)
		for _, l := range libs {
			assert.NotContains(t, l, "liburing", "liburing is linked statically")
		}
		out := runConsumer(t, bin)
		if uring {
			assert.Contains(t, out, "liburing linked statically")
		}
	})

	t.Run("static", func(t *testing.T) {
		bin := m.build("static", nil, "-ldflags", "-extldflags -static")
		libs, dyn := needed(t, bin)
		assert.False(t, dyn, "no interpreter")
		assert.Empty(t, libs)
		runConsumer(t, bin)
	})

	// No liburing .pc on the machine: the default build fails at once with
	// the fix in the message; -tags xtc_nouring builds. (A CGO_CFLAGS of
	// its own keeps a cached package build from hiding the lookup.)
	t.Run("no-liburing-pc", func(t *testing.T) {
		empty := t.TempDir()
		env := []string{"PKG_CONFIG_LIBDIR=" + empty, "PKG_CONFIG_PATH=" + empty,
			"CGO_CFLAGS=-O2 -g -DXTC_CONSUMER_NOPC=1"}
		out, err := m.goCmd(env, "build", "-o", filepath.Join(m.dir, "nopc"), ".")
		require.Error(t, err)
		assert.Contains(t, out, "install-liburing-dev-or-build-with-tags-xtc_nouring", out)
		bin := m.build("nouring", env, "-tags", "xtc_nouring")
		assert.Contains(t, runConsumer(t, bin), "xtc_nouring")
	})

	t.Run("arm64", func(t *testing.T) {
		cc, err := exec.LookPath("aarch64-linux-gnu-gcc")
		if err != nil {
			t.Skip("no aarch64-linux-gnu-gcc (make setup installs gcc-aarch64-linux-gnu)")
		}
		env := []string{"CGO_ENABLED=1", "GOOS=linux", "GOARCH=arm64", "CC=" + cc}
		// without the tag and with the target's (absent) liburing .pc: a
		// quick failure naming the fix, not a link error minutes later
		out, err := m.goCmd(append(env, "PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig",
			"PKG_CONFIG_PATH="), "build", "-o", filepath.Join(m.dir, "arm64-uring"), ".")
		if err != nil {
			assert.Contains(t, out, "xtc_nouring", out)
		} // else liburing-dev:arm64 is installed and the build worked
		bin := m.build("arm64", env, "-tags", "xtc_nouring", "-ldflags", "-extldflags -static")
		f, err := elf.Open(bin)
		require.NoError(t, err)
		assert.Equal(t, elf.EM_AARCH64, f.Machine)
		f.Close()
		if qemu, err := exec.LookPath("qemu-aarch64"); err == nil {
			assert.Contains(t, runConsumer(t, bin, qemu), "xtc_nouring")
		}
	})
}
