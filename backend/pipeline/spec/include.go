package spec

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec/internal/suggest"
)

// FileSource reads files of the repository at the commit being built. Paths are relative to the
// repository root, slash-separated and cleaned. Remote includes use a second FileSource that
// receives the URL. A missing file is an error matching fs.ErrNotExist (the only failure
// ignoreError skips); a file refused for its size is an error with a TooLarge method, like
// *FileTooLargeError.
type FileSource interface {
	ReadFile(path string) ([]byte, error)
}

// maxIncludes is CNB's limit on included files, nested ones counted.
const maxIncludes = 50

// maxReferenceDepth is how deep one !reference may lead through others.
const maxReferenceDepth = 10

// loader reads the main file and its includes and merges them into one tree.
type loader struct {
	opts   *Options
	d      *diags
	budget *budget
	files  int      // included files read so far
	stack  []string // files being loaded, for cycle detection
	// unread are the remote includes lint skipped: a !reference it cannot find may point
	// into one of them.
	unread []string
}

// load parses one file, loads its includes, and returns the merged tree: the includes in order,
// then the file itself, so that the including file overrides what it includes.
func (l *loader) load(file string, src []byte) *node {
	root := parseYAML(file, src, l.budget, l.d)
	return l.loadTree(root)
}

func (l *loader) loadTree(root *node) *node {
	if root == nil {
		return nil
	}
	if root.isNull() {
		return &node{kind: nMap, pos: root.pos}
	}
	if root.kind != nMap {
		l.d.errorf(root.pos, "a .cnb.yml must be a map of branch patterns, not %s", root.kindName())
		return nil
	}
	var merged *node
	own := &node{kind: nMap, tag: root.tag, pos: root.pos}
	for _, p := range root.pairs {
		if p.key.value != "include" {
			own.pairs = append(own.pairs, p)
			continue
		}
		for _, inc := range l.includes(p.val) {
			merged = mergeNodes(merged, inc)
		}
	}
	return mergeNodes(merged, own)
}

// includes loads every entry of an include list.
func (l *loader) includes(v *node) []*node {
	var entries []*node
	switch v.kind {
	case nSeq:
		entries = v.items
	case nScalar, nMap:
		if v.isNull() {
			return nil
		}
		entries = []*node{v} // a single entry is accepted as a list of one
	}
	var out []*node
	for _, e := range entries {
		if t := l.include(e); t != nil {
			out = append(out, t)
		}
	}
	return out
}

func (l *loader) include(e *node) *node {
	switch e.kind {
	case nScalar:
		return l.includeFile(e.value, e.pos, false)
	case nMap:
		if cfg := e.get("config"); cfg != nil {
			return l.includeConfig(cfg)
		}
		p := e.get("path")
		if p == nil || p.kind != nScalar || p.value == "" {
			l.d.errorf(e.pos, "an include entry needs path (or config)")
			return nil
		}
		ignore := false
		if ig := e.get("ignoreError"); ig != nil {
			b, ok := boolValue(ig)
			if !ok {
				l.d.errorf(ig.pos, "ignoreError must be true or false")
			}
			ignore = b
		}
		for _, pr := range e.pairs {
			if k := pr.key.value; k != "path" && k != "ignoreError" {
				l.d.warnHint(pr.key.pos, suggest.Hint(k, []string{"path", "ignoreError", "config"}), "unknown key %q in include entry", k)
			}
		}
		return l.includeFile(p.value, p.pos, ignore)
	}
	l.d.errorf(e.pos, "an include entry must be a path or a map, not %s", e.kindName())
	return nil
}

// includeConfig merges inline YAML: a map, or a string holding YAML.
func (l *loader) includeConfig(cfg *node) *node {
	if cfg.kind == nScalar && !cfg.isNull() {
		name := fmt.Sprintf("%s:%d (include config)", cfg.pos.File, cfg.pos.Line)
		return l.load(name, []byte(cfg.value))
	}
	return l.loadTree(cfg)
}

func isRemote(p string) bool {
	return strings.HasPrefix(p, "https://") || strings.HasPrefix(p, "http://")
}

func (l *loader) includeFile(p string, pos Pos, ignoreError bool) *node {
	remote := isRemote(p)
	if !remote {
		p = cleanRepoPath(p)
	}
	for _, f := range l.stack {
		if f == p {
			l.d.errorf(pos, "include cycle: %s includes itself through %s", p, strings.Join(l.stack, " → "))
			return nil
		}
	}
	l.files++
	if l.files > maxIncludes {
		if l.files == maxIncludes+1 {
			l.d.errorf(pos, "more than %d included files", maxIncludes)
		}
		return nil
	}
	src := l.opts.Files
	if remote {
		src = l.opts.Remote
		if src == nil {
			// Lint never goes to the network; the build resolves it with the user's permissions.
			l.d.warnf(pos, "remote include %s is not read here; it is resolved when the build runs", p)
			l.unread = append(l.unread, p)
			return nil
		}
	}
	var data []byte
	err := fmt.Errorf("no file source configured")
	if src != nil {
		data, err = src.ReadFile(p)
	}
	if err != nil {
		if !ignoreError || !ignorable(err) {
			readFailure(l.d, pos, "cannot include "+p, err)
		}
		return nil
	}
	l.stack = append(l.stack, p)
	defer func() { l.stack = l.stack[:len(l.stack)-1] }()
	return l.load(p, data)
}

// cleanRepoPath makes an include path relative to the repository root.
func cleanRepoPath(p string) string {
	p = path.Clean("/" + strings.ReplaceAll(p, "\\", "/"))
	return strings.TrimPrefix(p, "/")
}

// mergeNodes merges b into a (CNB's "object merge mode"): list + list appends, map + map merges
// key by key (recursively, so two files can both add pipelines to main.push), a list against a
// map keeps the list, and otherwise the later value wins. Neither input is modified.
func mergeNodes(a, b *node) *node {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.kind == nSeq && b.kind == nSeq:
		m := *b
		m.items = append(append([]*node(nil), a.items...), b.items...)
		return &m
	case a.kind == nMap && b.kind == nMap:
		m := *a
		m.pairs = append([]pair(nil), a.pairs...)
		for _, bp := range b.pairs {
			found := false
			for i, ap := range m.pairs {
				if ap.key.value == bp.key.value {
					m.pairs[i] = pair{key: bp.key, val: mergeNodes(ap.val, bp.val)}
					found = true
					break
				}
			}
			if !found {
				m.pairs = append(m.pairs, bp)
			}
		}
		return &m
	case a.kind == nSeq && b.kind == nMap:
		return a
	case a.kind == nMap && b.kind == nSeq:
		return b
	}
	return b
}

// resolveReferences replaces every `!reference [path, …]` in root by a copy of the value at that
// path of the merged tree. A referenced value may itself contain references, at most
// maxReferenceDepth deep.
//
// unread are the remote includes lint did not read. A reference found nowhere else may be
// defined in one of them: it is a warning that says so, not an error, and the errors that its
// stand-in value (an empty string) then causes at the reference's position are dropped.
func resolveReferences(root *node, b *budget, d *diags, unread []string) *node {
	if !hasReference(root) {
		return root // most files have none: skip the copy
	}
	r := refResolver{root: root, budget: b, d: d, unread: unread}
	return r.resolve(root, 0)
}

func hasReference(n *node) bool {
	if n.tag == "!reference" {
		return true
	}
	for _, p := range n.pairs {
		if hasReference(p.val) {
			return true
		}
	}
	for _, it := range n.items {
		if hasReference(it) {
			return true
		}
	}
	return false
}

type refResolver struct {
	root   *node
	budget *budget
	d      *diags
	unread []string
}

// resolve returns n with its references replaced. The tree is not modified: targets are looked
// up in the merged tree as written, so the depth counted is the length of a chain of references
// however the chain is laid out in the file.
func (r *refResolver) resolve(n *node, depth int) *node {
	if n == nil {
		return nil
	}
	if n.tag == "!reference" {
		if depth >= maxReferenceDepth {
			r.d.errorf(n.pos, "!reference nested more than %d levels deep (or referring to itself)", maxReferenceDepth)
			return &node{kind: nScalar, tag: "!!null", pos: n.pos}
		}
		target, err := r.lookup(n)
		if errors.Is(err, errNoSuchValue) && len(r.unread) > 0 {
			r.d.warnHint(n.pos, "lint reads no remote include; the build resolves it with "+strings.Join(r.unread, ", "),
				"%v here; it may be defined in a remote include, which lint cannot check", err)
			if r.d.unchecked == nil {
				r.d.unchecked = map[Pos]bool{}
			}
			r.d.unchecked[n.pos] = true
			return &node{kind: nScalar, tag: "!!str", pos: n.pos}
		}
		if err != nil {
			r.d.errorf(n.pos, "%v", err)
			return &node{kind: nScalar, tag: "!!null", pos: n.pos}
		}
		return r.resolve(target, depth+1)
	}
	if n.kind == nScalar {
		return n // scalars are never modified, so they can be shared
	}
	if !r.budget.take() {
		return &node{kind: nScalar, tag: "!!null", pos: n.pos}
	}
	c := *n
	if n.kind == nMap {
		c.pairs = make([]pair, len(n.pairs))
		for i, p := range n.pairs {
			c.pairs[i] = pair{key: p.key, val: r.resolve(p.val, depth)}
		}
	} else {
		c.items = make([]*node, len(n.items))
		for i, it := range n.items {
			c.items[i] = r.resolve(it, depth)
		}
	}
	return &c
}

var errNoSuchValue = errors.New("no such value")

// lookup follows a !reference path from the root: map keys, or list indexes.
func (r *refResolver) lookup(ref *node) (*node, error) {
	if ref.kind != nSeq || len(ref.items) == 0 {
		return nil, fmt.Errorf("!reference takes a list of keys, like !reference [.vars, image]")
	}
	cur := r.root
	var walked []string
	for _, it := range ref.items {
		if it.kind != nScalar {
			return nil, fmt.Errorf("!reference path elements must be keys or indexes")
		}
		walked = append(walked, it.value)
		switch cur.kind {
		case nMap:
			cur = cur.get(it.value)
		case nSeq:
			i, err := strconv.Atoi(it.value)
			if err != nil || i < 0 || i >= len(cur.items) {
				cur = nil
			} else {
				cur = cur.items[i]
			}
		default:
			cur = nil
		}
		if cur == nil {
			return nil, fmt.Errorf("!reference [%s]: %w", strings.Join(walked, ", "), errNoSuchValue)
		}
	}
	return cur, nil
}
