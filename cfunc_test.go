//go:build cgo

package xtc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xtc-go/xtc/internal/ctest"
)

// XTC_GO_FUNC compiles for a function of the executor's shape and fails
// the build, naming the function, for any other shape.
func TestCFuncMacroChecksTheShape(t *testing.T) {
	cc := strings.Fields(strings.TrimSpace(goEnv(t, "CC")))
	require.NotEmpty(t, cc)
	inc, err := filepath.Abs("csrc/include")
	require.NoError(t, err)
	dir := t.TempDir()
	compile := func(body string) (string, error) {
		src := filepath.Join(dir, "k.c")
		require.NoError(t, os.WriteFile(src, []byte("#include <stdint.h>\n#include <xtc_exec.h>\n"+body), 0o644))
		args := append(cc[1:], "-std=gnu11", "-Wall", "-Werror", "-I"+inc, "-c", src, "-o", filepath.Join(dir, "k.o"))
		out, err := exec.Command(cc[0], args...).CombinedOutput()
		return string(out), err
	}
	out, err := compile("static intptr_t good(void *arg) { return (intptr_t)arg + 1; }\nXTC_GO_FUNC(good)\nvoid *get(void) { return good_cfunc(); }\n")
	require.NoError(t, err, out)
	for name, body := range map[string]string{
		"proc shape": "static void bad(void *arg) { (void)arg; }\nXTC_GO_FUNC(bad)\n",
		"int arg":    "static intptr_t bad(int n) { return n; }\nXTC_GO_FUNC(bad)\n",
		"int result": "static int bad(void *arg) { return arg != 0; }\nXTC_GO_FUNC(bad)\n",
	} {
		out, err := compile(body)
		assert.Error(t, err, name)
		assert.Contains(t, out, "xtc: bad must be intptr_t bad(void *arg)", name)
	}
}

func goEnv(t *testing.T, key string) string {
	out, err := exec.Command("go", "env", key).Output()
	require.NoError(t, err)
	return string(out)
}

func TestCFuncCalls(t *testing.T) {
	var zero CFunc
	assert.False(t, zero.Valid())
	assert.Nil(t, zero.Pointer())
	assert.False(t, CFuncOf(nil).Valid())
	ident := CFuncOf(ctest.Ident())
	assert.True(t, ident.Valid())
	assert.Equal(t, ctest.Ident(), ident.Pointer())

	e, err := NewExec(1)
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Start()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err = e.Call(ctx, zero, nil)
	assert.ErrorIs(t, err, ErrInval)
	_, err = e.CallInt(ctx, zero, 1)
	assert.ErrorIs(t, err, ErrInval)
	_, err = e.CallAsync(zero, nil)
	assert.ErrorIs(t, err, ErrInval)

	v, err := e.CallInt(ctx, ident, 41)
	require.NoError(t, err)
	assert.EqualValues(t, 41, v)
	c := ctest.NewCell(7)
	defer c.Free()
	v, err = e.Call(ctx, ident, c.Ptr())
	require.NoError(t, err)
	assert.Equal(t, int64(uintptr(c.Ptr())), v)
	r, err := e.CallAsync(ident, nil, WithLoop(0))
	require.NoError(t, err)
	v, err = r.Wait(ctx)
	require.NoError(t, err)
	assert.Zero(t, v)

	require.NoError(t, e.Close())
	_, err = e.CallInt(ctx, ident, 1)
	assert.ErrorIs(t, err, ErrClosed)
}
