package xtc

// Tests of the build glue: the arch shims, the meson source list, the generated
// errors, the embed. They need no C runtime and also run with CGO_ENABLED=0.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/errtable"
)

// cgo compiles csrc/*.c itself; the assembly of csrc/arch/ only through a
// one-line shim per file in csrc/ (zz_arch_<stem>_<goarch>.S). Each arch
// file needs exactly its shim, or `go build` silently leaves it out.
func TestArchShimsMatchCsrc(t *testing.T) {
	arch, err := filepath.Glob("csrc/arch/*.S")
	require.NoError(t, err)
	require.NotEmpty(t, arch)
	want := map[string]string{}
	for _, a := range arch {
		stem := strings.TrimSuffix(filepath.Base(a), ".S")
		goarch := ""
		switch {
		case strings.Contains(stem, "x86_64"):
			goarch = "amd64"
		case strings.Contains(stem, "aarch64"):
			goarch = "arm64"
		}
		require.NotEmpty(t, goarch, "%s: no GOARCH for this file", a)
		want["csrc/zz_arch_"+stem+"_"+goarch+".S"] = `#include "arch/` + stem + `.S"`
	}
	shims, err := filepath.Glob("csrc/*.S")
	require.NoError(t, err)
	have := map[string]bool{}
	for _, s := range shims {
		have[s] = true
		inc, ok := want[s]
		if !assert.True(t, ok, "%s shims no csrc/arch file", s) {
			continue
		}
		b, err := os.ReadFile(s)
		require.NoError(t, err)
		assert.Contains(t, string(b), inc, s)
		assert.Contains(t, string(b), "//go:build cgo", s)
	}
	for s := range want {
		assert.True(t, have[s], "missing shim %s", s)
	}
}

// mesonList returns the quoted names in the first match of re's group 1.
func mesonList(t *testing.T, file, re string) map[string]bool {
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	m := regexp.MustCompile(re).FindSubmatch(b)
	require.NotNil(t, m, "%s: %s not found", file, re)
	out := map[string]bool{}
	for _, q := range regexp.MustCompile(`'([^']+)'`).FindAllSubmatch(m[1], -1) {
		out[string(q[1])] = true
	}
	return out
}

// meson.build lists its sources explicitly, both directions: every csrc/*.c
// is built (else it is silently left out of the C library) and every
// listed file exists (meson also fails on that).
func TestMesonListsEveryCsrcFile(t *testing.T) {
	listed := mesonList(t, "meson.build", `(?s)core_src = files\((.*?)\)`)
	cs, err := filepath.Glob("csrc/*.c")
	require.NoError(t, err)
	have := map[string]bool{}
	for _, c := range cs {
		have[c] = true
		assert.True(t, listed[c], "%s is not in meson.build core_src", c)
	}
	for c := range listed {
		assert.True(t, have[c], "meson.build core_src lists %s, which does not exist", c)
	}
	hdrs := mesonList(t, "meson.build", `(?s)public_headers = \[(.*?)\]`)
	hs, err := filepath.Glob("csrc/include/*.h")
	require.NoError(t, err)
	hhave := map[string]bool{}
	for _, h := range hs {
		hhave[filepath.Base(h)] = true
		assert.True(t, hdrs[filepath.Base(h)], "%s is not in meson.build public_headers", h)
	}
	for h := range hdrs {
		assert.True(t, hhave[h], "meson.build public_headers lists %s, which does not exist", h)
	}
}

// test/meson.build's test_plan names every test/test_*.c (an unlisted test
// never runs) and only files that exist.
func TestMesonListsEveryTest(t *testing.T) {
	b, err := os.ReadFile("test/meson.build")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)test_plan = \{(.*?)\n\}`).FindSubmatch(b)
	require.NotNil(t, m, "test_plan not found")
	plan := map[string]bool{}
	for _, q := range regexp.MustCompile(`(?m)^\s*'([a-z0-9_]+)':`).FindAllSubmatch(m[1], -1) {
		plan["test_"+string(q[1])+".c"] = true
	}
	// Registered on their own further down test/meson.build.
	special := map[string]bool{"test_codemap.c": true, "test_static.c": true,
		"test_stack_lazy.c": true}
	ts, err := filepath.Glob("test/test_*.c")
	require.NoError(t, err)
	have := map[string]bool{}
	for _, f := range ts {
		f = filepath.Base(f)
		have[f] = true
		if special[f] {
			assert.Contains(t, string(b), "'"+f+"'", "%s is not registered", f)
			continue
		}
		assert.True(t, plan[f], "%s is not in test/meson.build test_plan", f)
	}
	for f := range plan {
		assert.True(t, have[f], "test_plan lists %s, which does not exist", f)
	}
}

// The root's cgo preambles see the core through the public headers and one
// internal header, csrc/gobridge_int.h, which carries no struct layout of the
// core (its design note says why). Any other internal header here would make
// a preamble depend on csrc's build flags again.
func TestPreamblesIncludeOnlyTheBridge(t *testing.T) {
	gos, err := filepath.Glob("*.go")
	require.NoError(t, err)
	inc := regexp.MustCompile(`(?m)^#\s*include\s+"([^"]+)"`)
	bridged := 0
	for _, f := range gos {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range inc.FindAllSubmatch(b, -1) {
			h := string(m[1])
			if h == "gobridge_int.h" {
				bridged++
				continue
			}
			_, perr := os.Stat(filepath.Join("csrc/include", h))
			assert.NoError(t, perr, "%s includes %q: only csrc/include/*.h and gobridge_int.h", f, h)
		}
	}
	assert.NotZero(t, bridged, "no preamble includes gobridge_int.h: the test lost its subject")
}

// Every relative link of the user and maintainer docs (README.md, docs/,
// csrc/HACKING.md, examples' READMEs) names a file or folder that exists:
// sections move between these files, and a moved one must not leave a dead
// link behind.
func TestDocLinksResolve(t *testing.T) {
	files := []string{"README.md", "csrc/HACKING.md"}
	for _, g := range []string{"docs/*.md", "docs/*/*.md", "examples/*/*/README.md"} {
		m, err := filepath.Glob(g)
		require.NoError(t, err)
		files = append(files, m...)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range link.FindAllSubmatch(b, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") ||
				strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			_, err := os.Stat(filepath.Join(filepath.Dir(f), target))
			assert.NoError(t, err, "%s links to %s, which does not exist", f, m[1])
			checked++
		}
	}
	assert.NotZero(t, checked, "no relative link found: the test lost its subject")
}

// errors_gen.go must be what tools/generrors writes from xtc_errors.h.
func TestErrorsGenUpToDate(t *testing.T) {
	hdr, err := os.ReadFile("csrc/include/xtc_errors.h")
	require.NoError(t, err)
	codes, err := errtable.Parse(hdr)
	require.NoError(t, err)
	want, err := errtable.GenerateGo(codes)
	require.NoError(t, err)
	have, err := os.ReadFile("errors_gen.go")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(have), "run `go generate` (make generate)")

	for _, c := range codes {
		if c.Value == 0 {
			continue
		}
		e := Errno(c.Value)
		assert.Equal(t, "XTC_E_"+c.Name, e.Name())
		assert.Equal(t, "xtc: "+c.Text, e.Error())
	}
}

func TestErrnoUnknown(t *testing.T) {
	assert.Equal(t, "xtc: unknown error -999", Errno(-999).Error())
	assert.Equal(t, "XTC_E_(-999)", Errno(-999).Name())
	assert.Equal(t, "xtc: unknown error 5", Errno(5).Error())
}

func TestErrorWrapsCode(t *testing.T) {
	err := mkerr("xtc_send", int(ErrAgain))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrAgain)
	assert.NotErrorIs(t, err, ErrInval)
	var xe *Error
	require.ErrorAs(t, err, &xe)
	assert.Equal(t, "xtc_send", xe.Op)
	assert.Equal(t, ErrAgain, xe.Code)
	assert.True(t, strings.HasPrefix(err.Error(), "xtc: xtc_send: resource temporarily unavailable"), err.Error())
	assert.NoError(t, mkerr("xtc_send", 0))
}

func TestParseRejectsBadTables(t *testing.T) {
	for name, src := range map[string]string{
		"missing":  "nothing here",
		"dup":      "#define XTC_ERRORS(X) X(OK, 0, \"ok\") \\\n X(A, -1, \"a\") \\\n X(A, -2, \"b\")\n",
		"positive": "#define XTC_ERRORS(X) X(OK, 0, \"ok\") \\\n X(A, 1, \"a\")\n",
		"no ok":    "#define XTC_ERRORS(X) X(A, -1, \"a\")\n",
	} {
		_, err := errtable.Parse([]byte(src))
		assert.Error(t, err, name)
	}
}
