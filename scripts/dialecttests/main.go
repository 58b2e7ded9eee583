// Command dialecttests prints the tests whose SQLite half make test runs without the race
// detector: the top-level tests that run their body on both databases (storetest.Each, and
// backend/app's mxEachDialect), as a -run/-skip pattern (-pattern) or as the packages that hold
// them (-packages).
//
// Why: SQLite here is modernc.org/sqlite, C translated to Go, so the race detector instruments
// the database engine itself; the SQLite half of a dual-database test costs 5 to 10 times its
// PostgreSQL half under -race (backend/app's authorization matrix: 283 s against 23 s without),
// and the race detector watches our code, which the PostgreSQL half runs the same. So make test's
// race pass skips what the pattern matches and a second pass, without -race, runs exactly that:
// every test still runs, each half once. The pattern only moves work between the passes, so a
// test this command misses keeps both halves under -race.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	pattern := flag.Bool("pattern", false, "print the -run/-skip pattern")
	packages := flag.Bool("packages", false, "print the packages, as ./dir paths")
	flag.Parse()
	tests, dirs, err := find(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "dialecttests:", err)
		os.Exit(1)
	}
	switch {
	case *pattern:
		fmt.Printf("^(%s)$/^sqlite$\n", strings.Join(tests, "|"))
	case *packages:
		fmt.Println(strings.Join(dirs, " "))
	default:
		fmt.Fprintln(os.Stderr, "dialecttests: -pattern or -packages")
		os.Exit(2)
	}
}

// find returns the names of the top-level tests under root whose body calls storetest.Each or
// mxEachDialect, and the directories of every package with a test of one of those names (so
// that the second pass runs wherever the first one skipped, even a same-named test elsewhere).
func find(root string) (tests, dirs []string, err error) {
	names, inDir := map[string]bool{}, map[string]bool{}
	testsIn := map[string][]string{} // directory → its top-level test names
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			dir := "./" + filepath.ToSlash(filepath.Dir(path))
			testsIn[dir] = append(testsIn[dir], fn.Name.Name)
			if bothDialects(fn.Body) {
				names[fn.Name.Name] = true
			}
		}
		return nil
	})
	for n := range names {
		tests = append(tests, n)
	}
	for dir, ts := range testsIn {
		for _, n := range ts {
			if names[n] {
				inDir[dir] = true
			}
		}
	}
	for d := range inDir {
		dirs = append(dirs, d)
	}
	sort.Strings(tests)
	sort.Strings(dirs)
	return tests, dirs, err
}

// bothDialects says whether a statement of body (not of a closure in it) calls storetest.Each or
// mxEachDialect: then the test's own subtests are named "sqlite" and "postgres".
func bothDialects(body *ast.BlockStmt) bool {
	for _, st := range body.List {
		es, ok := st.(*ast.ExprStmt)
		if !ok {
			continue
		}
		call, ok := es.X.(*ast.CallExpr)
		if !ok {
			continue
		}
		switch fun := call.Fun.(type) {
		case *ast.SelectorExpr:
			if x, ok := fun.X.(*ast.Ident); ok && x.Name == "storetest" && fun.Sel.Name == "Each" {
				return true
			}
		case *ast.Ident:
			if fun.Name == "mxEachDialect" || fun.Name == "Each" {
				return true
			}
		}
	}
	return false
}
