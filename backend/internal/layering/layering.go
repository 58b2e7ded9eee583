// Package layering checks who may write and read which tables, by reading the code: the
// packages are loaded and type-checked (golang.org/x/tools/go/packages) and every call through
// gorm or database/sql is traced to the model or table it writes (Check) or reads (CheckReads).
// A domain that owns tables (a Rule) is the only one whose code may write them, and, where the
// rule says so, read them; everyone else calls its service, so a renamed column breaks one
// package at compile time instead of three at run time.
//
// It sees what the code says, not what it does at run time: a write is found when the model is
// named in the call chain (db.Model(&build.Pipeline{}).Updates(…), tx.Create(&job),
// db.Table("pipelines").Update(…)) or when the SQL of an Exec or Raw is a constant. Code that
// builds SQL from pieces at run time is out of its sight; keep such SQL out of the code base.
// Test files are read too (see Load): a fixture that seeds another domain's rows uses that
// domain's test helpers (backend/build/buildtest).
package layering

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Rule says that the package Owner (and the packages below it) alone writes Tables, which
// include the tables of every gorm model the owner's packages define.
type Rule struct {
	Owner  string   // an import path, e.g. github.com/nimbus-build/nimbus/backend/build
	Tables []string // table names, e.g. builds, pipelines
}

// Code is loaded, type-checked code: packages and their test files.
type Code struct {
	// Packages are the packages the patterns named, without their tests.
	Packages []*packages.Package
	units    []unit
}

// unit is files type-checked together: a package, or a package with its test files, or its
// external test package.
type unit struct {
	path  string
	fset  *token.FileSet
	files []*ast.File
	info  *types.Info
}

// Load type-checks the packages patterns name, run from dir, and their test files.
//
// The packages are loaded by go/packages, their dependencies from export data. Test files are
// then type-checked here against what that load holds, instead of asking go list for test
// variants: those need export data of every test package, a second compile of the module's
// tests that costs most of a minute on two cores. An import only tests use (a test helper of a
// third party) is therefore unknown to them; what it names is untyped, which no rule needs.
func Load(dir string, patterns ...string) (*Code, error) {
	fset := token.NewFileSet()
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes |
			packages.NeedTypesInfo | packages.NeedImports,
		Dir:  dir,
		Fset: fset,
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	var errs []string
	known := map[string]*types.Package{"unsafe": types.Unsafe}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
		if p.Types != nil {
			known[p.PkgPath] = p.Types
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("layering: load: %s", strings.Join(errs, "; "))
	}
	c := &Code{Packages: pkgs}
	for _, p := range pkgs {
		c.units = append(c.units, unit{path: p.PkgPath, fset: fset, files: p.Syntax, info: p.TypesInfo})
		tests, err := testUnits(fset, p, known)
		if err != nil {
			return nil, err
		}
		c.units = append(c.units, tests...)
	}
	return c, nil
}

// testUnits parses the test files in p's folder and type-checks them: the in-package ones with
// p's own files, the external ones (package p_test) on their own.
func testUnits(fset *token.FileSet, p *packages.Package, known map[string]*types.Package) ([]unit, error) {
	names, _ := filepath.Glob(filepath.Join(p.Dir, "*_test.go"))
	var internal, external []*ast.File
	for _, name := range names {
		if ok, err := build.Default.MatchFile(p.Dir, filepath.Base(name)); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("layering: %w", err)
		}
		if f.Name.Name == p.Name+"_test" {
			external = append(external, f)
		} else {
			internal = append(internal, f)
		}
	}
	var out []unit
	check := func(path string, files []*ast.File, self *types.Package) *types.Package {
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
		imp := importerFunc(func(path string) (*types.Package, error) {
			if self != nil && path == self.Path() {
				return self, nil
			}
			if pkg, ok := known[path]; ok {
				return pkg, nil
			}
			return nil, fmt.Errorf("%s: imported only by tests", path)
		})
		// Errors (an import only tests use) leave what they touch untyped; the rest is checked.
		conf := types.Config{Importer: imp, Error: func(error) {}}
		pkg, _ := conf.Check(path, fset, files, info)
		out = append(out, unit{path: path, fset: fset, files: files, info: info})
		return pkg
	}
	self := p.Types
	if len(internal) > 0 {
		self = check(p.PkgPath, append(slices.Clone(p.Syntax), internal...), nil)
	}
	if len(external) > 0 {
		check(p.PkgPath+"_test", external, self)
	}
	return out, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// writes are the methods of *gorm.DB that write rows.
var writes = []string{"Create", "CreateInBatches", "Save", "Update", "Updates", "UpdateColumn", "UpdateColumns", "Delete", "FirstOrCreate"}

// rawSQL are the methods, of *gorm.DB and of database/sql's handles, that run SQL text.
var rawSQL = []string{"Exec", "ExecContext", "Raw"}

// writeSQL finds the table an INSERT, UPDATE or DELETE statement writes.
var writeSQL = regexp.MustCompile(`(?is)\b(?:insert\s+into|update|delete\s+from)\s+"?([a-z_][a-z0-9_]*)`)

// Violation is one write (or, from CheckReads, one read) of a table by a package that does not
// own it.
type Violation struct {
	Pos   token.Position
	Table string // the table, or the owner's model type
	Owner string
	Call  string // what the code says: "Updates on build.Pipeline"
	Read  bool
}

func (v Violation) String() string {
	if v.Read {
		return fmt.Sprintf("%s: %s reads %s, which only %s may read; ask its service", v.Pos, v.Call, v.Table, v.Owner)
	}
	return fmt.Sprintf("%s: %s writes %s, which only %s may write", v.Pos, v.Call, v.Table, v.Owner)
}

// Check returns every write, in the code, of a table a rule gives to another package. A file
// that is in a package and in its test unit is reported once.
func Check(c *Code, rules []Rule) []Violation {
	return c.calls(true, func(u unit, call *ast.CallExpr) []Violation { return checkCall(u, call, rules) })
}

// calls runs check on every call of the code (test files too when tests) and returns what it
// reported, once each, in file order.
func (c *Code) calls(tests bool, check func(unit, *ast.CallExpr) []Violation) []Violation {
	var out []Violation
	seen := map[string]bool{}
	for _, u := range c.units {
		for _, f := range u.files {
			if !tests && strings.HasSuffix(u.fset.Position(f.Pos()).Filename, "_test.go") {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					for _, v := range check(u, call) {
						if !seen[v.String()] {
							seen[v.String()] = true
							out = append(out, v)
						}
					}
				}
				return true
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pos.String() < out[j].Pos.String() })
	return out
}

// owns reports whether the package at pkgPath is the rule's owner, below it, or the owner's
// external test package.
func owns(r Rule, pkgPath string) bool {
	return pkgPath == r.Owner || pkgPath == r.Owner+"_test" || strings.HasPrefix(pkgPath, r.Owner+"/")
}

func checkCall(p unit, call *ast.CallExpr, rules []Rule) []Violation {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !isDBHandle(p.info.TypeOf(sel.X)) {
		return nil
	}
	method := sel.Sel.Name
	pos := p.fset.Position(call.Pos())
	var out []Violation
	flag := func(r Rule, table, what string) {
		if !owns(r, p.path) {
			out = append(out, Violation{Pos: pos, Table: table, Owner: r.Owner, Call: method + " " + what})
		}
	}
	switch {
	case slices.Contains(rawSQL, method) && len(call.Args) > 0:
		for _, arg := range call.Args {
			tv, ok := p.info.Types[arg]
			if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
				continue
			}
			for _, m := range writeSQL.FindAllStringSubmatch(constant.StringVal(tv.Value), -1) {
				for _, r := range rules {
					if slices.Contains(r.Tables, strings.ToLower(m[1])) {
						flag(r, m[1], "of SQL")
					}
				}
			}
		}
	case slices.Contains(writes, method):
		// What is written: the call's own arguments (Create(&job)) and, down the chain, the
		// arguments of Model(…) and Table(…).
		targets := append([]ast.Expr(nil), call.Args...)
		for x := sel.X; ; {
			c, ok := x.(*ast.CallExpr)
			if !ok {
				break
			}
			s, ok := c.Fun.(*ast.SelectorExpr)
			if !ok {
				break
			}
			if s.Sel.Name == "Model" || s.Sel.Name == "Table" {
				targets = append(targets, c.Args...)
			}
			x = s.X
		}
		for _, t := range targets {
			if tv, ok := p.info.Types[t]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
				table := constant.StringVal(tv.Value)
				for _, r := range rules {
					if slices.Contains(r.Tables, table) {
						flag(r, table, fmt.Sprintf("on table %q", table))
					}
				}
				continue
			}
			named := modelType(p.info.TypeOf(t))
			if named == nil || named.Obj().Pkg() == nil {
				continue
			}
			for _, r := range rules {
				if owns(r, named.Obj().Pkg().Path()) {
					flag(r, named.Obj().Pkg().Name()+"."+named.Obj().Name(), "on "+named.Obj().Pkg().Name()+"."+named.Obj().Name())
				}
			}
		}
	}
	return out
}

// isDBHandle reports whether t is a *gorm.DB or a database/sql handle.
func isDBHandle(t types.Type) bool {
	ptr, ok := t.(*types.Pointer)
	if !ok {
		return false
	}
	named, ok := ptr.Elem().(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return false
	}
	switch named.Obj().Pkg().Path() + "." + named.Obj().Name() {
	case "gorm.io/gorm.DB", "database/sql.DB", "database/sql.Tx", "database/sql.Conn":
		return true
	}
	return false
}

// modelType is the named struct behind a value gorm writes: T, *T, []T, *[]T, []*T.
func modelType(t types.Type) *types.Named {
	for t != nil {
		switch u := t.(type) {
		case *types.Pointer:
			t = u.Elem()
		case *types.Slice:
			t = u.Elem()
		case *types.Named:
			if _, ok := u.Underlying().(*types.Struct); ok {
				return u
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// reads are the methods of *gorm.DB and database/sql's handles that name what they read: a
// table (Table), SQL text (Joins, Raw, Where's subqueries, database/sql's queries) or a model
// (Model and the finders' destinations).
var (
	readTable  = []string{"Table"}
	readSQL    = []string{"Joins", "Raw", "Where", "Or", "Not", "Select", "Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext"}
	readModel  = []string{"Model", "Find", "First", "Take", "Last", "Scan", "FirstOrInit", "FindInBatches"}
	readSQLRef = regexp.MustCompile(`(?is)\b(?:from|join)\s+"?([a-z_][a-z0-9_]*)`)
)

// CheckReads returns every read, in the code, of a table a rule gives to another package: a
// Table("pipelines …"), SQL text that selects FROM or JOINs it, or a model of the owner's
// (db.Model(&build.Pipeline{}), db.Find(&[]build.Job{})). Like Check, it sees only constant
// SQL. Test files are skipped when tests is false: a test may look at another domain's rows
// to assert what its service did.
func CheckReads(c *Code, rules []Rule, tests bool) []Violation {
	return c.calls(tests, func(u unit, call *ast.CallExpr) []Violation { return checkRead(u, call, rules) })
}

func checkRead(p unit, call *ast.CallExpr, rules []Rule) []Violation {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !isDBHandle(p.info.TypeOf(sel.X)) {
		return nil
	}
	method := sel.Sel.Name
	var out []Violation
	flag := func(r Rule, table, what string) {
		if !owns(r, p.path) {
			out = append(out, Violation{Pos: p.fset.Position(call.Pos()), Table: table, Owner: r.Owner, Call: method + " " + what, Read: true})
		}
	}
	for i, arg := range call.Args {
		if tv, ok := p.info.Types[arg]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
			if i > 0 && !slices.Contains(readSQL, method) {
				continue
			}
			text := constant.StringVal(tv.Value)
			var tables []string
			switch {
			case slices.Contains(readTable, method):
				if fs := strings.Fields(strings.ReplaceAll(text, `"`, "")); len(fs) > 0 {
					tables = append(tables, strings.ToLower(fs[0]))
				}
			case slices.Contains(readSQL, method):
				for _, m := range readSQLRef.FindAllStringSubmatch(text, -1) {
					tables = append(tables, strings.ToLower(m[1]))
				}
			}
			for _, table := range tables {
				for _, r := range rules {
					if slices.Contains(r.Tables, table) {
						flag(r, table, fmt.Sprintf("of table %q", table))
					}
				}
			}
			continue
		}
		if !slices.Contains(readModel, method) {
			continue
		}
		named := modelType(p.info.TypeOf(arg))
		if named == nil || named.Obj().Pkg() == nil {
			continue
		}
		for _, r := range rules {
			if owns(r, named.Obj().Pkg().Path()) {
				flag(r, named.Obj().Pkg().Name()+"."+named.Obj().Name(), "of "+named.Obj().Pkg().Name()+"."+named.Obj().Name())
			}
		}
	}
	return out
}

// ImportRule forbids the packages From names (an import path, and those below it) to import To
// (an import path, and those below it).
type ImportRule struct {
	From, To string
	Why      string
	// NotTests leaves test files out: an integration test may drive the real thing on the
	// other side of a boundary (the agent, say) that the code under test may not import.
	NotTests bool
}

// CheckImports returns "from imports to: why" for every import a rule forbids, once per
// package; tests included unless the rule says NotTests.
func CheckImports(c *Code, rules []ImportRule) []string {
	under := func(path, root string) bool { return path == root || strings.HasPrefix(path, root+"/") }
	var out []string
	for _, u := range c.units {
		from := strings.TrimSuffix(u.path, "_test")
		for _, f := range u.files {
			test := strings.HasSuffix(u.fset.Position(f.Pos()).Filename, "_test.go")
			for _, spec := range f.Imports {
				imp, _ := strconv.Unquote(spec.Path.Value)
				for _, r := range rules {
					if test && r.NotTests {
						continue
					}
					msg := fmt.Sprintf("%s imports %s: %s", from, imp, r.Why)
					if under(from, r.From) && under(imp, r.To) && !under(from, r.To) && !slices.Contains(out, msg) {
						out = append(out, msg)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// HTTPUse is what CheckHTTP reports: a file outside the handler files that imports an HTTP
// framework package or names one of net/http's status codes.
type HTTPUse struct {
	Pos  token.Position
	What string // `imports "github.com/gin-gonic/gin"`, "names http.StatusNotFound"
}

func (u HTTPUse) String() string {
	return fmt.Sprintf("%s: %s outside a handler file", u.Pos, u.What)
}

// statusWriters are net/http's functions that answer with a status of their own.
var statusWriters = []string{"Error", "NotFound", "Redirect"}

// CheckHTTP returns every place, in the non-test files of the loaded packages that handler
// does not accept (it is given the package path and the file's base name), that imports one of
// framework (import paths), names an http.Status… constant, calls http.Error, NotFound or
// Redirect, or writes a status with WriteHeader. net/http itself may be imported
// (an HTTP client needs it); a service says what went wrong with a fault kind, never a status.
func CheckHTTP(c *Code, framework []string, handler func(pkgPath, file string) bool) []HTTPUse {
	var out []HTTPUse
	for _, p := range c.Packages {
		for _, f := range p.Syntax {
			pos := p.Fset.Position(f.Pos())
			if handler(p.PkgPath, filepath.Base(pos.Filename)) {
				continue
			}
			for _, spec := range f.Imports {
				if imp, _ := strconv.Unquote(spec.Path.Value); slices.Contains(framework, imp) {
					out = append(out, HTTPUse{Pos: p.Fset.Position(spec.Pos()), What: "imports " + spec.Path.Value})
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				name := sel.Sel.Name
				if x, ok := sel.X.(*ast.Ident); ok {
					if pn, ok := p.TypesInfo.Uses[x].(*types.PkgName); ok && pn.Imported().Path() == "net/http" &&
						(strings.HasPrefix(name, "Status") || slices.Contains(statusWriters, name)) {
						out = append(out, HTTPUse{Pos: p.Fset.Position(sel.Pos()), What: "names http." + name})
						return true
					}
				}
				// A status written as a plain number names no constant: w.WriteHeader(404) on
				// any ResponseWriter is a status all the same.
				if s := p.TypesInfo.Selections[sel]; name == "WriteHeader" && s != nil && s.Kind() == types.MethodVal {
					out = append(out, HTTPUse{Pos: p.Fset.Position(sel.Pos()), What: "calls WriteHeader"})
				}
				return true
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pos.String() < out[j].Pos.String() })
	return out
}
