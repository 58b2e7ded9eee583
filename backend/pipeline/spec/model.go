package spec

import "time"

// The decoded form of a .cnb.yml: what decode.go builds from the merged node tree and plan.go
// turns into Plans. Strings that the language substitutes stay raw here (substitution needs the
// trigger); everything else is already typed and checked.

// str is a string with the place it came from.
type str struct {
	v   string
	pos Pos
}

type branchDecl struct {
	pattern  string
	pos      Pos
	glob     *Glob // nil for "$"
	fallback bool  // the "$" key
	events   []*eventDecl
}

type eventDecl struct {
	key       string // as written: push, "crontab: 0 2 * * *", schedule, …
	pos       Pos
	cron      *cronSpec // for a crontab key
	pipelines []*pipelineDecl
}

// common holds the keys that pipelines, stages and jobs all have.
type common struct {
	env     []envVar
	imports []str
	retry   int
	lock    *lockDecl
	conds   condDecl
}

type pipelineDecl struct {
	common
	pos       Pos
	objectKey string // the key in object form
	name      *str
	cron      *cronSpec // schedule list items

	tags       []str
	cpus       int
	cpusPos    Pos
	namespace  string
	image      *imageDecl
	build      *buildDecl
	volumes    []str
	git        gitDecl
	services   []serviceDecl
	label      map[string][]string
	stages     []*stageDecl
	failStages []*stageDecl
	endStages  []*stageDecl
	allowFail  *str
}

type imageDecl struct {
	name, user, password str
}

type buildDecl struct {
	dockerfile, target       str
	by, versionBy            []str
	buildArgs                []envVar
	ignoreBuildArgsInVersion bool
	sync                     bool
}

type gitDecl struct {
	enable, submodules, submodulesRemote, lfs *bool
}

type serviceDecl struct {
	name, version string
	options       *node
	pos           Pos
}

type envVar struct {
	name, value string
	pos         Pos
}

type condDecl struct {
	ifScript      string
	ifModify      []str
	ifNewBranch   bool
	breakIfModify bool
	skipIfModify  bool
}

type lockDecl struct {
	key              *str
	expires, timeout time.Duration
	wait             bool
	cancelInProgress bool
	cancelInWait     bool
}

type stageDecl struct {
	common
	pos      Pos
	name     *str
	parallel bool
	jobs     []*jobDecl
	image    *imageDecl
}

type jobDecl struct {
	common
	pos          Pos
	key          string // object key in parallel form
	name         *str
	kind         string // protocol.KindScript, KindPlugin, KindBuiltin
	script       string
	image        *imageDecl
	settings     *node
	settingsFrom []str
	args         []string
	typ          string
	options      *node
	optionsFrom  []str
	exports      map[string]string
	timeout      time.Duration
	timeoutPos   Pos
	allowFail    *str
}
