package spec

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fastMatches parses src both ways. When the fast parser accepts the file, yaml.v3 must accept it
// too, report nothing, and build the same tree (tags and positions included) for the same budget.
// It returns whether the fast parser accepted the file.
func fastMatches(t *testing.T, name string, src []byte) bool {
	t.Helper()
	src = normalize(src)
	fb := &budget{left: maxNodes}
	fast, ok := parseFast(name, src, fb)
	if !ok {
		return false
	}
	sb := &budget{left: maxNodes}
	var d diags
	slow := parseSlow(name, src, sb, &d)
	if len(d.list) > 0 || slow == nil {
		t.Errorf("%s: the fast parser accepted what yaml.v3 reports: %v\n%s", name, d.list, src)
		return true
	}
	if diff := nodeDiff(fast, slow, "$"); diff != "" {
		t.Errorf("%s: fast and yaml.v3 trees differ: %s\n--- source:\n%s", name, diff, src)
		return true
	}
	if fb.left != sb.left {
		t.Errorf("%s: fast parser took %d from the budget, the converter %d\n%s", name, maxNodes-fb.left, maxNodes-sb.left, src)
	}
	return true
}

// nodeDiff describes the first difference between two trees, or returns "".
func nodeDiff(a, b *node, path string) string {
	if a == nil || b == nil {
		if a != b {
			return fmt.Sprintf("%s: %v vs %v", path, a, b)
		}
		return ""
	}
	if a.kind != b.kind || a.tag != b.tag || a.value != b.value || a.pos != b.pos {
		return fmt.Sprintf("%s: fast {kind %d tag %s value %q at %v} vs yaml.v3 {kind %d tag %s value %q at %v}",
			path, a.kind, a.tag, a.value, a.pos, b.kind, b.tag, b.value, b.pos)
	}
	if len(a.pairs) != len(b.pairs) || len(a.items) != len(b.items) {
		return fmt.Sprintf("%s: fast has %d pairs and %d items, yaml.v3 %d and %d", path, len(a.pairs), len(a.items), len(b.pairs), len(b.items))
	}
	for i := range a.pairs {
		if d := nodeDiff(a.pairs[i].key, b.pairs[i].key, fmt.Sprintf("%s.key[%d]", path, i)); d != "" {
			return d
		}
		if d := nodeDiff(a.pairs[i].val, b.pairs[i].val, path+"."+a.pairs[i].key.value); d != "" {
			return d
		}
	}
	for i := range a.items {
		if d := nodeDiff(a.items[i], b.items[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
			return d
		}
	}
	return ""
}

// fastSeeds are small files that poke at every construct the fast parser knows and at its
// edges; the fuzz target starts from them.
var fastSeeds = []string{
	"", "# only a comment\n", "---\n", "---\na: 1\n", "a: 1\n---\nb: 2\n", "a: 1\n...\n", "%YAML 1.2\n---\na: 1\n",
	"a\n", "a: b\nc: d\n", "a:\n  b: c\n  d: e\nf: g\n", "a:\nb:\n", "a: # c\n  b: 1\n", "a:   \n",
	"- a\n- b\n", "-\n- \n-  # c\n", "- - a\n  - b\n- c\n", "- a: 1\n  b: 2\n- c: 3\n", "-   a: 1\n    b: 2\n",
	"a:\n- x\n- y\nb: z\n", "a:\n  - x\n  - y\n", "a:\n  b:\n  - x\n  c: 1\n",
	"a: 'it''s'\nb: \"q\\\"x\\n\\t\\u00e9\\x41\"\n", "'a b': 1\n\"c\": 2\n", "a: \"\\z\"\n", "a: 'x\n  y'\n",
	"a: b c # d\ne: f#g\n", "a: b:c\n", "a: b: c\n", "a: http://x/y\n", "a: -x\nb: ?y\nc: :z\n", "a: - x\n",
	"a: 1\nb: 1.5\nc: true\nd: null\ne: ~\nf: 0x1F\ng: 2001-12-14\nh: .inf\ni: -1\nj: +2\nk: yes\nl: on\nm: <<\n",
	"a: [1, b, \"c\", 'd']\nb: {x: 1, y: [2, 3], z: {w: v}}\nc: []\nd: {}\n", "a: [a, b, ]\n", "a: [a,\n  b]\n",
	"a: {x: cnb:arch:amd64, y: a b}\n", "a: [x: 1]\n", "a: {x}\n", "a: {\"x\":1}\n", "a: [1] x\n", "a: [1] # c\n",
	".d: &d {x: 1, y: 2}\na: {<<: *d, y: 3}\nb:\n  <<: *d\n  z: 4\n", "a: &a\n  x: 1\nb: *a\nc: *a\n",
	"a: &a [1, 2]\nb: [*a, *a]\n", "a: &a x\nb: *a\n", "a: *nope\n", "a: &a\nb: *a\n", "a: &a &b x\n",
	".a: &a {x: 1}\n.b: &b {x: 2, y: 3}\nc:\n  <<: [*a, *b]\n  z: 0\n", "a:\n  <<: 1\n", "a: {<<: [1]}\n",
	"a: &x 1\na2: &x 2\nb: *x\n", "a: &a [*a]\n", "a: 1\na: 2\n", "a: {x: 1, x: 2}\n", "<< : {x: 1}\n",
	"a: !reference [.x, y]\nb: !reference\n  - .x\n  - y\nc: !custom v\n", "d: !!str 1\n", "e: ! x\n", "a: &a !t x\nb: !t &b\n  c: 1\n",
	"a: |\n  line 1\n  line 2\nb: 1\n", "a: |-\n  x\n\n  y\n\n\nb: 1\n", "a: |+\n  x\n\n\nb: 1\n", "a: |\n\n  x\n",
	"a: |\n    deeper\n  less\n", "a: |\n  x\n   y\n  # not a comment\n# a comment\nb: 2\n", "a: |\nb: 1\n",
	"a: |+\n\nb: 1\n", "a: |\n      \n  x\n", "a: |2\n   x\n", "a: >\n  x\n  y\n", "a: |\n  x", "a: |-\n  x",
	"- |\n  x\n- |\n   y\n  z\n", "a:\n  - |\n    x\n  - y\n", "a: |  # c\n  x\n", "a: |x\n",
	"a: 1\n b: 2\n", "a:\n    b: 1\n  c: 2\n", "a: x\n  y\n", "- x\n  y\n", "a:\n  x\n", "a:\n  x\n  y\n",
	"a:\tb\n", "a: b\r\nc: d\r\n", "\xef\xbb\xbfa: b\n", "é: ü\nx: {ключ: значение, k: [α, β]}\n", "a: \x01\n",
	"? a\n: b\n", "[a]: b\n", "&a a: b\n", "a: &a b: c\n", "- &a\n  x: 1\n- *a\n", "a: `x`\n", "a: @x\n",
	"a: 'x' y\n", "a: \"x\":\n", "a:b\n", "a :b\n", "a : b\n", "-a\n", "- -a\n", "a: |\n  x\n b: 1\n",
	"key with spaces: v\n1: one\n~: tilde\n", "- a:\n  - x\n  b: 1\n- a:\n  - y\n- c\n", "a: &z 1\nb: [*z, {c: *z}]\n",
	"a: |\n  x\n\n\n", "a: |+\n  x\n\n", "a: |-\n\n", "a: |\n  # x\n  y\n", "a: 'x' # c\n", "a:  b  \n",
	"a: {b: [c, d], e: f}  # c\nb: \"\\U0001F600 \\x\"\n", "x: -\n", "- -\n", "a: [-x, -]\n", "a: {b: }\n", "a: [?x]\n", "a: #c\n#d\n  b: 1\n", "  a: 1\n  b: 2\n", "  - a\n  - b\n",
}

func TestFastParseMatchesYAMLv3(t *testing.T) {
	accepted := 0
	cases := append(append([]string(nil), fastSeeds...), fastEdgeCases...)
	for i, s := range cases {
		if fastMatches(t, fmt.Sprintf("case%d", i), []byte(s)) {
			accepted++
		}
	}
	t.Logf("fast parser took %d of %d cases", accepted, len(cases))
}

// At a budget of exactly what a file costs, the fast parser still takes it and leaves what the
// converter leaves; one less, and it gives the file to yaml.v3, which reports the excess.
func TestFastParseBudgetEdge(t *testing.T) {
	for _, doc := range []string{
		"a: &a [1, 2, 3]\nb: &b [*a, *a]\nc: [*b, *b, {<<: {x: *a}}]\n",
		"a: &a {x: 1}\nb:\n  <<: *a\n  y: *a\nc: *a\n",
		"a: &a\n  - 1\n  - &b {z: 2}\nb: [*a, *b]\n",
		"- &a 1\n- *a\n- *a\n",
	} {
		b := &budget{left: maxNodes}
		if _, ok := parseFast("f", []byte(doc), b); !ok {
			t.Fatalf("refused %q", doc)
		}
		cost := maxNodes - b.left
		for _, left := range []int{cost, cost - 1} {
			fb, sb := &budget{left: left}, &budget{left: left}
			_, ok := parseFast("f", []byte(doc), fb)
			var d diags
			parseSlow("f", []byte(doc), sb, &d)
			if ok != (left == cost) {
				t.Errorf("%q with %d left of a cost of %d: fast parser took it: %v", doc, left, cost, ok)
			}
			if ok && fb.left != sb.left {
				t.Errorf("%q: fast parser left %d, the converter %d", doc, fb.left, sb.left)
			}
			if !ok && len(d.list) == 0 {
				t.Errorf("%q with %d left: yaml.v3's path reports no excess", doc, left)
			}
		}
	}
}

// The files people write take the fast way, and it agrees with yaml.v3 on each of them.
func TestFastParseTakesRealFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/brief/*.yml")
	corpus, _ := filepath.Glob("testdata/corpus/*/.cnb.yml")
	incs, _ := filepath.Glob("testdata/corpus/*/.cnb/*/*.yml")
	all := append(append(files, corpus...), incs...)
	var refused []string
	for _, f := range all {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !fastMatches(t, f, src) {
			refused = append(refused, f)
		}
	}
	for _, f := range files {
		for _, r := range refused {
			if r == f {
				t.Errorf("the fast parser refused the brief's %s", f)
			}
		}
	}
	if !fastMatches(t, "generated", genJobs(10, 10, 10)) {
		t.Error("the fast parser refused the benchmark's generated file")
	}
	t.Logf("fast parser took %d of %d real files; refused: %s", len(all)-len(refused), len(all), strings.Join(refused, ", "))
	if len(refused)*4 > len(all) {
		t.Errorf("the fast parser refused %d of %d real files", len(refused), len(all))
	}
}

// FuzzFastParse: on any input the fast parser either gives up or agrees with yaml.v3.
func FuzzFastParse(f *testing.F) {
	for _, s := range append(append([]string(nil), fastSeeds...), fastEdgeCases...) {
		f.Add([]byte(s))
	}
	f.Add(genJobs(1, 2, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		fastMatches(t, "fuzz", data)
	})
}

// yamlGen writes random YAML in the styles .cnb.yml files use — nested block maps and lists at
// random indentation, compact and indentless lists, every scalar style the fast parser knows,
// literal blocks, flow collections, anchors, aliases, merge keys, comments and blank lines — so
// the comparison with yaml.v3 covers valid files, which byte-level fuzzing rarely produces.
type yamlGen struct {
	r       *rand.Rand
	b       strings.Builder
	anchors []string
	n       int
}

var genWords = []string{"a", "main", "cnb:arch:amd64", "go test ./...", "x-y_z", "http://h/p?q=1#f", "a#b", "-mod", "?q", ":c",
	"1", "-2", "0x1F", "1.5", "true", "False", "null", "~", "yes", "2001-12-14", ".inf", "<<", "é ü", "ключ", "a, b", "[x]y", "$CNB_BRANCH"}

func (g *yamlGen) scalar(flow bool) string {
	switch g.r.IntN(6) {
	case 0:
		return "'" + strings.ReplaceAll(genWords[g.r.IntN(len(genWords))], "'", "''") + "''s'"
	case 1:
		return strconv.Quote(genWords[g.r.IntN(len(genWords))] + "\t\"\\")
	}
	for {
		w := genWords[g.r.IntN(len(genWords))]
		if flow && strings.ContainsAny(w, ",[]{}?") || strings.HasPrefix(w, ":") && flow {
			continue
		}
		return w
	}
}

func (g *yamlGen) flow(depth int) string {
	if depth > 2 || g.r.IntN(3) == 0 {
		if len(g.anchors) > 0 && g.r.IntN(5) == 0 {
			return "*" + g.anchors[g.r.IntN(len(g.anchors))]
		}
		return g.scalar(true)
	}
	n := g.r.IntN(4)
	parts := make([]string, n)
	if g.r.IntN(2) == 0 {
		for i := range parts {
			parts[i] = g.flow(depth + 1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	for i := range parts {
		parts[i] = fmt.Sprintf("k%d: %s", i, g.flow(depth+1))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func (g *yamlGen) comment() string {
	if g.r.IntN(6) == 0 {
		return "  # note: x"
	}
	return ""
}

func (g *yamlGen) extra(ind string) {
	switch g.r.IntN(8) {
	case 0:
		g.b.WriteString("\n")
	case 1:
		g.b.WriteString(ind + "# comment\n")
	}
}

// value writes what follows "key:" or "- " (after which the text is at column col) and ends the
// line; ind is the indentation of the enclosing collection.
func (g *yamlGen) value(ind, depth int, inMap bool) {
	pad := strings.Repeat(" ", ind)
	props := ""
	if g.r.IntN(8) == 0 {
		g.n++
		name := fmt.Sprintf("an%d", g.n)
		props = " &" + name
		defer func() { g.anchors = append(g.anchors, name) }()
	}
	step := 1 + g.r.IntN(4)
	switch c := g.r.IntN(10); {
	case depth < 4 && c < 3:
		g.b.WriteString(props + g.comment() + "\n")
		g.extra(pad)
		g.mapping(ind+step, depth+1)
	case depth < 4 && c < 5:
		g.b.WriteString(props + g.comment() + "\n")
		g.extra(pad)
		if inMap && g.r.IntN(3) == 0 {
			g.seq(ind, depth+1) // indentless
		} else {
			g.seq(ind+step, depth+1)
		}
	case c == 5:
		g.b.WriteString(props + " |" + []string{"", "-", "+"}[g.r.IntN(3)] + g.comment() + "\n")
		lpad := strings.Repeat(" ", ind+step)
		for i := g.r.IntN(4); i >= 0; i-- {
			switch g.r.IntN(5) {
			case 0:
				g.b.WriteString("\n")
			case 1:
				g.b.WriteString(lpad + "  indented # not a comment\n")
			default:
				g.b.WriteString(lpad + g.scalar(false) + "\n")
			}
		}
		g.extra(pad)
	case c == 6:
		g.b.WriteString(props + " " + g.flow(0) + g.comment() + "\n")
	case c == 7 && len(g.anchors) > 0 && props == "":
		g.b.WriteString(" *" + g.anchors[g.r.IntN(len(g.anchors))] + g.comment() + "\n")
	case c == 8 && props == "":
		g.b.WriteString(g.comment() + "\n") // null
	default:
		if props != "" && g.r.IntN(2) == 0 {
			props += " !reference"
		}
		g.b.WriteString(props + " " + g.scalar(false) + g.comment() + "\n")
	}
}

func (g *yamlGen) mapping(ind, depth int) {
	pad := strings.Repeat(" ", ind)
	for i := 0; i < 1+g.r.IntN(4); i++ {
		if i == 0 && len(g.anchors) > 0 && g.r.IntN(4) == 0 {
			g.b.WriteString(pad + "<<: *" + g.anchors[g.r.IntN(len(g.anchors))] + "\n")
		}
		g.b.WriteString(fmt.Sprintf("%skey%d_%d:", pad, depth, i))
		g.value(ind, depth, true)
	}
}

func (g *yamlGen) seq(ind, depth int) {
	pad := strings.Repeat(" ", ind)
	for i := 0; i < 1+g.r.IntN(4); i++ {
		g.b.WriteString(pad + "-")
		if depth < 4 && g.r.IntN(4) == 0 {
			// A compact map: its keys stand after the dash.
			g.b.WriteString(" ")
			g.mappingCompact(ind+2, depth+1)
			continue
		}
		g.value(ind, depth, false)
	}
}

func (g *yamlGen) mappingCompact(ind, depth int) {
	pad := strings.Repeat(" ", ind)
	for i := 0; i < 1+g.r.IntN(3); i++ {
		if i > 0 {
			g.b.WriteString(pad)
		}
		g.b.WriteString(fmt.Sprintf("c%d_%d:", depth, i))
		g.value(ind, depth, true)
	}
}

// Generated files: the fast parser takes every one yaml.v3 reads cleanly, and agrees with it.
func TestFastParseGeneratedFiles(t *testing.T) {
	accepted, total := 0, 3000
	for seed := 0; seed < total; seed++ {
		g := &yamlGen{r: rand.New(rand.NewPCG(uint64(seed), 7))}
		g.mapping(0, 0)
		src := []byte(g.b.String())
		if fastMatches(t, fmt.Sprintf("gen%d", seed), src) {
			accepted++
		} else {
			// The generator writes nothing the fast parser does not know; what it refuses must
			// be wrong YAML (a merge of a scalar, a block less indented than its parent, …).
			var d diags
			if parseSlow("gen", src, &budget{left: maxNodes}, &d); len(d.list) == 0 {
				t.Errorf("gen%d: the fast parser refused a file yaml.v3 reads cleanly:\n%s", seed, src)
			}
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("fast parser took %d of %d generated files", accepted, total)
	if accepted*2 < total {
		t.Errorf("the fast parser took only %d of %d generated files", accepted, total)
	}
}
