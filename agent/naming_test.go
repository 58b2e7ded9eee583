package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// In the code a job's directory is the checkout, and "workspace" means only the cloud IDE
// (agent/runner's package doc says why). This guard keeps the two apart where both live: no
// name declared in the packages that handle the job's directory says workspace (or ws),
// except in the files and the names that are about the cloud IDE. Uses of other packages'
// names (protocol.Plan.Workspace, protocol.EventWorkspaceReady) and strings, which users and
// pipelines see (CNB_BUILD_WORKSPACE, /workspace, messages), are not declarations and pass.
func TestJobDirectoryIsCalledCheckout(t *testing.T) {
	// The cloud IDE's own files, where "workspace" is the right word.
	ideFiles := map[string]bool{
		"runner/devenv.go":      true,
		"executor/workspace.go": true,
	}
	// Names of the cloud IDE declared elsewhere in these packages.
	ideNames := map[string]bool{
		"endWorkspace": true, // runner/plan.go: how a stopping cloud workspace ends
	}
	bad := regexp.MustCompile(`(?i)workspace|^ws$`)
	for _, dir := range []string{"runner", "executor", "imagebuild", "dockerservice"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if ideFiles[filepath.ToSlash(path)] || strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range declaredNames(f) {
				if bad.MatchString(id.Name) && !ideNames[id.Name] {
					t.Errorf("%s: %s names the job's directory the IDE's way: call it checkout", fset.Position(id.Pos()), id.Name)
				}
			}
		}
	}
}

// declaredNames are the identifiers f declares: types, functions, methods, fields, parameters,
// results, constants, variables, and what := and range bind.
func declaredNames(f *ast.File) []*ast.Ident {
	var ids []*ast.Ident
	fields := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, fd := range fl.List {
			ids = append(ids, fd.Names...)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			ids = append(ids, n.Name)
			fields(n.Recv)
		case *ast.FuncType:
			fields(n.Params)
			fields(n.Results)
		case *ast.StructType:
			fields(n.Fields)
		case *ast.InterfaceType:
			fields(n.Methods)
		case *ast.TypeSpec:
			ids = append(ids, n.Name)
		case *ast.ValueSpec:
			ids = append(ids, n.Names...)
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, e := range n.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						ids = append(ids, id)
					}
				}
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				for _, e := range []ast.Expr{n.Key, n.Value} {
					if id, ok := e.(*ast.Ident); ok {
						ids = append(ids, id)
					}
				}
			}
		}
		return true
	})
	return ids
}
