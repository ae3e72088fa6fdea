package xtc

// The cgo and !cgo builds export the same API (nocgo_api_test.go runs in
// both tag sets: it only parses files).

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exportedAPI lists the exported functions, methods (Recv.Name), types,
// and package-level vars and consts of the package as built with cgo on
// or off.
// parsePkg parses the package's files as built with cgo on or off, with
// their comments (the godoc test reads them too).
func parsePkg(t *testing.T, cgo bool) (*token.FileSet, []*ast.File) {
	ctx := build.Default
	ctx.CgoEnabled = cgo
	pkg, err := ctx.ImportDir(".", 0)
	require.NoError(t, err)
	files := append(append([]string{}, pkg.GoFiles...), pkg.CgoFiles...)
	fset := token.NewFileSet()
	var out []*ast.File
	for _, f := range files {
		af, err := parser.ParseFile(fset, filepath.Join(".", f), nil, parser.ParseComments)
		require.NoError(t, err)
		out = append(out, af)
	}
	return fset, out
}

// funcName is "Name" or "Recv.Name" for an exported function or method of
// an exported type; ok is false otherwise.
func funcName(d *ast.FuncDecl) (name string, ok bool) {
	if !d.Name.IsExported() {
		return "", false
	}
	name = d.Name.Name
	if d.Recv != nil && len(d.Recv.List) == 1 {
		rt := d.Recv.List[0].Type
		if s, isPtr := rt.(*ast.StarExpr); isPtr {
			rt = s.X
		}
		if id, isID := rt.(*ast.Ident); isID {
			if !id.IsExported() {
				return "", false
			}
			name = id.Name + "." + name
		}
	}
	return name, true
}

func exportedAPI(t *testing.T, cgo bool) map[string]bool {
	_, files := parsePkg(t, cgo)
	api := map[string]bool{}
	for _, af := range files {
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if name, ok := funcName(d); ok {
					api["func "+name] = true
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() {
							api["type "+sp.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.IsExported() {
								api["value "+n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return api
}

// noCgoDebt: exported with cgo and not yet stubbed for !cgo (doc.go promises
// that every call returns ErrNoCgo there, so an importing program still
// compiles). Empty: a new gap fails (add a stub, or list it here as debt),
// and so does an entry that is no longer missing.
var noCgoDebt = map[string]bool{}

// The !cgo build (nocgo.go) declares everything
// the cgo build exports, checked by parsing both file sets.
func TestNoCgoStubsCoverAPI(t *testing.T) {
	withCgo, without := exportedAPI(t, true), exportedAPI(t, false)
	var missing, stale []string
	for k := range withCgo {
		if !without[k] && !noCgoDebt[k] {
			missing = append(missing, k)
		}
	}
	for k := range noCgoDebt {
		if without[k] || !withCgo[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	assert.Empty(t, missing, "exported with cgo, missing from the !cgo build (add a stub)")
	assert.Empty(t, stale, "noCgoDebt entries that are no longer missing: remove them")
}
