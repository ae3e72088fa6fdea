package xtc

// Every exported name of the package has a doc comment (the godoc the cgo
// build shows: `go doc -all`). Parses the files, so it runs in both tag
// sets.

import (
	"go/ast"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGodocEveryExportedName(t *testing.T) {
	fset, files := parsePkg(t, true)
	var missing []string
	for _, af := range files {
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if _, ok := funcName(d); !ok || d.Doc != nil {
					continue
				}
				missing = append(missing, fset.Position(d.Pos()).String()+" func "+d.Name.Name)
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() && sp.Doc == nil && d.Doc == nil {
							missing = append(missing, fset.Position(sp.Pos()).String()+" type "+sp.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							// a documented group covers its members
							if n.IsExported() && sp.Doc == nil && sp.Comment == nil && d.Doc == nil {
								missing = append(missing, fset.Position(n.Pos()).String()+" "+n.Name)
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "exported names without a doc comment")
}
