package spec

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nimbus-build/nimbus/backend/pipeline/spec/internal/suggest"
	"github.com/nimbus-build/nimbus/internal/protocol"
)

// Decoding of leaf values: scalars, string lists, durations, images, env maps, locks and the
// other small shapes the grammar allows in several places.

// str reads a scalar as a string; nil when null.
func (dc *decoder) str(v *node, what string) *str {
	if v.isNull() {
		return nil
	}
	if v.kind != nScalar {
		dc.d.errorf(v.pos, "%s must be a string, not %s", what, v.kindName())
		return nil
	}
	return &str{v: v.value, pos: v.pos}
}

// strs reads a string or a list of strings.
func (dc *decoder) strs(v *node, what string) []str {
	switch {
	case v.isNull():
		return nil
	case v.kind == nScalar:
		return []str{{v: v.value, pos: v.pos}}
	case v.kind == nSeq:
		out := make([]str, 0, len(v.items))
		for _, it := range v.items {
			if it.kind != nScalar || it.isNull() {
				hint := ""
				if it.kind == nSeq {
					hint = nestedListHint
				}
				dc.d.errorHint(it.pos, hint, "%s must be a list of strings; found %s", what, it.kindName())
				continue
			}
			out = append(out, str{v: it.value, pos: it.pos})
		}
		return out
	}
	dc.d.errorf(v.pos, "%s must be a string or a list of strings, not %s", what, v.kindName())
	return nil
}

// boolValue reads YAML 1.1 and 1.2 spellings of a boolean.
func boolValue(v *node) (bool, bool) {
	if v == nil || v.kind != nScalar {
		return false, false
	}
	switch strings.ToLower(v.value) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off":
		return false, true
	}
	return false, false
}

func (dc *decoder) boolean(v *node, what string) bool {
	if v.isNull() {
		return false
	}
	b, ok := boolValue(v)
	if !ok {
		dc.d.errorf(v.pos, "%s must be true or false, not %q", what, v.value)
	}
	return b
}

func (dc *decoder) integer(v *node, what string) int {
	if v.isNull() {
		return 0
	}
	if v.kind == nScalar {
		if n, err := strconv.ParseInt(strings.ReplaceAll(v.value, "_", ""), 0, 32); err == nil {
			return int(n)
		}
		if f, err := strconv.ParseFloat(v.value, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<31 {
			return int(f)
		}
	}
	dc.d.errorf(v.pos, "%s must be a whole number, not %s", what, describe(v))
	return 0
}

func describe(v *node) string {
	if v.kind == nScalar && !v.isNull() {
		return strconv.Quote(v.value)
	}
	return v.kindName()
}

func (dc *decoder) retry(v *node) int {
	n := dc.integer(v, "retry")
	if n < 0 {
		dc.d.errorf(v.pos, "retry must not be negative")
		return 0
	}
	return n
}

// allowFailure is a boolean or a string that becomes one after substitution.
func (dc *decoder) allowFailure(v *node) *str {
	s := dc.str(v, "allowFailure")
	if s != nil && !strings.Contains(s.v, "$") {
		if _, ok := boolValue(v); !ok {
			dc.d.errorf(v.pos, "allowFailure must be true, false or a variable, not %q", s.v)
		}
	}
	return s
}

// object reads settings or options: a map kept as nodes until substitution.
func (dc *decoder) object(v *node, what string) *node {
	if !dc.isMap(v, what, "a map") {
		return nil
	}
	return v
}

// image reads an image: a name, or {name, dockerUser, dockerPassword}.
func (dc *decoder) image(v *node, what string) *imageDecl {
	switch {
	case v.isNull():
		return nil
	case v.kind == nScalar:
		return &imageDecl{name: str{v: v.value, pos: v.pos}}
	case v.kind == nMap:
		img := &imageDecl{}
		for _, kv := range v.pairs {
			s := dc.str(kv.val, what+"."+kv.key.value)
			if s == nil {
				continue
			}
			switch kv.key.value {
			case "name":
				img.name = *s
			case "dockerUser":
				img.user = *s
			case "dockerPassword":
				img.password = *s
			default:
				dc.unknownKey(kv.key, what, []string{"name", "dockerUser", "dockerPassword"})
			}
		}
		if img.name.v == "" {
			dc.d.errorf(v.pos, "%s needs a name", what)
			return nil
		}
		return img
	}
	dc.d.errorf(v.pos, "%s must be an image name or a map with name, not %s", what, v.kindName())
	return nil
}

// build reads docker.build: a Dockerfile path, or the full map.
func (dc *decoder) build(v *node) *buildDecl {
	switch {
	case v.isNull():
		return nil
	case v.kind == nScalar:
		return &buildDecl{dockerfile: str{v: v.value, pos: v.pos}}
	case v.kind != nMap:
		dc.d.errorf(v.pos, "docker.build must be a Dockerfile path or a map, not %s", v.kindName())
		return nil
	}
	b := &buildDecl{}
	for _, kv := range v.pairs {
		k, val := kv.key.value, kv.val
		switch k {
		case "dockerfile":
			if s := dc.str(val, "docker.build.dockerfile"); s != nil {
				b.dockerfile = *s
			}
		case "target":
			if s := dc.str(val, "docker.build.target"); s != nil {
				b.target = *s
			}
		case "by":
			b.by = dc.strs(val, "docker.build.by")
		case "versionBy":
			b.versionBy = dc.strs(val, "docker.build.versionBy")
		case "buildArgs":
			b.buildArgs = dc.env(val)
		case "ignoreBuildArgsInVersion":
			b.ignoreBuildArgsInVersion = dc.boolean(val, k)
		case "sync":
			b.sync = dc.boolean(val, k)
		default:
			dc.unknownKey(kv.key, "docker.build", []string{"dockerfile", "target", "by", "versionBy", "buildArgs", "ignoreBuildArgsInVersion", "sync"})
		}
	}
	if b.dockerfile.v == "" {
		dc.d.errorf(v.pos, "docker.build needs a dockerfile")
		return nil
	}
	return b
}

// volumes reads docker.volumes: a list, or one comma-separated string.
func (dc *decoder) volumes(v *node) []str {
	var out []str
	for _, s := range dc.strs(v, "docker.volumes") {
		for _, part := range strings.Split(s.v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, str{v: part, pos: s.pos})
			}
		}
	}
	for _, s := range out {
		if !strings.Contains(s.v, "$") {
			if _, err := parseVolume(s.v); err != nil {
				dc.d.errorf(s.pos, "%v", err)
			}
		}
	}
	return out
}

var volumeTypes = map[string]string{
	"copy-on-write": protocol.VolumeCopyOnWrite, "cow": protocol.VolumeCopyOnWrite,
	"read-write": protocol.VolumeReadWrite, "rw": protocol.VolumeReadWrite,
	"read-only": protocol.VolumeReadOnly, "ro": protocol.VolumeReadOnly,
	"copy-on-write-read-only": protocol.VolumeCopyOnWriteReadOnly,
	"data":                    protocol.VolumeData,
}

// parseVolume reads <group>:<path>:<type>, <path>:<type> or <path>; copy-on-write by default.
func parseVolume(s string) (protocol.Volume, error) {
	parts := strings.Split(s, ":")
	vol := protocol.Volume{Type: protocol.VolumeCopyOnWrite}
	switch len(parts) {
	case 1:
		vol.Path = parts[0]
	case 2:
		vol.Path = parts[0]
		t, ok := volumeTypes[parts[1]]
		if !ok {
			return vol, fmt.Errorf("volume %q: unknown type %q (copy-on-write, read-write, read-only, copy-on-write-read-only or data)", s, parts[1])
		}
		vol.Type = t
	case 3:
		vol.Group, vol.Path = parts[0], parts[1]
		t, ok := volumeTypes[parts[2]]
		if !ok {
			return vol, fmt.Errorf("volume %q: unknown type %q (copy-on-write, read-write, read-only, copy-on-write-read-only or data)", s, parts[2])
		}
		vol.Type = t
	default:
		return vol, fmt.Errorf("volume %q: expected <group>:<path>:<type>, <path>:<type> or <path>", s)
	}
	if vol.Path == "" {
		return vol, fmt.Errorf("volume %q has no path", s)
	}
	return vol, nil
}

func (dc *decoder) git(v *node) gitDecl {
	var g gitDecl
	if !dc.isMap(v, "git", "a map with enable, submodules or lfs") {
		return g
	}
	flag := func(val *node, what string) *bool {
		b := dc.boolean(val, what)
		return &b
	}
	for _, kv := range v.pairs {
		k, val := kv.key.value, kv.val
		switch {
		case k == "enable":
			g.enable = flag(val, "git.enable")
		case (k == "submodules" || k == "lfs") && val.kind == nMap:
			for _, sub := range val.pairs {
				switch {
				case sub.key.value == "enable" && k == "submodules":
					g.submodules = flag(sub.val, "git.submodules.enable")
				case sub.key.value == "enable":
					g.lfs = flag(sub.val, "git.lfs.enable")
				case sub.key.value == "remote" && k == "submodules":
					g.submodulesRemote = flag(sub.val, "git.submodules.remote")
				default:
					dc.unknownKey(sub.key, "git."+k, []string{"enable", "remote"})
				}
			}
		case k == "submodules":
			g.submodules = flag(val, "git.submodules")
		case k == "lfs":
			g.lfs = flag(val, "git.lfs")
		default:
			dc.unknownKey(kv.key, "git", []string{"enable", "submodules", "lfs"})
		}
	}
	return g
}

// knownServices are the services of the reference.
var knownServices = []string{"docker", "vscode"}

// services reads a list of "name[:version]" strings or {name, options} maps.
func (dc *decoder) services(v *node) []serviceDecl {
	items := []*node{v}
	switch {
	case v.isNull():
		return nil
	case v.kind == nSeq:
		items = v.items
	case v.kind == nMap:
		dc.d.errorf(v.pos, "services must be a list, not a map")
		return nil
	}
	var out []serviceDecl
	for _, it := range items {
		var s serviceDecl
		switch it.kind {
		case nScalar:
			s.name, s.version, _ = strings.Cut(it.value, ":")
		case nMap:
			for _, kv := range it.pairs {
				switch kv.key.value {
				case "name":
					if n := dc.str(kv.val, "service name"); n != nil {
						s.name, s.version, _ = strings.Cut(n.v, ":")
					}
				case "options":
					s.options = dc.object(kv.val, "service options")
				default:
					dc.unknownKey(kv.key, "service", []string{"name", "options"})
				}
			}
		default:
			dc.d.errorHint(it.pos, nestedListHint, "a service must be a name or {name, options}, not %s", it.kindName())
			continue
		}
		s.pos = it.pos
		if s.name == "" {
			dc.d.errorf(it.pos, "a service needs a name")
			continue
		}
		if !slices.Contains(knownServices, s.name) {
			dc.d.warnHint(it.pos, suggest.Hint(s.name, knownServices), "unknown service %q; only docker and vscode exist, so it is ignored", s.name)
			continue
		}
		out = append(out, s)
	}
	return out
}

// builtinVarNames are the built-in variables that a .cnb.yml cannot override.
var builtinVarNames = []string{"CI", "CNB", "CNB_EVENT", "CNB_BRANCH", "CNB_BRANCH_SHA", "CNB_DEFAULT_BRANCH",
	"CNB_IS_CRONEVENT", "CNB_COMMIT", "CNB_COMMIT_SHORT", "CNB_IS_TAG", "CNB_IS_NEW_BRANCH", "CNB_REPO_SLUG",
	"CNB_REPO_SLUG_LOWERCASE", "CNB_REPO_NAME", "CNB_BUILD_ID", "CNB_BUILD_WORKSPACE", "CNB_PIPELINE_NAME",
	"CNB_PIPELINE_KEY", "CNB_PIPELINE_ID", "CNB_CPUS", "CNB_MEMORY", "CNB_TOKEN", "CNB_TOKEN_USER_NAME",
	"CNB_DOCKER_REGISTRY", "CNB_BUILD_USER", "CNB_BUILD_STAGE_NAME", "CNB_BUILD_JOB_NAME", "CNB_BUILD_JOB_KEY"}

// env reads an env map: names to scalar values (numbers and booleans as written).
func (dc *decoder) env(v *node) []envVar {
	if !dc.isMap(v, "env", "a map of names to values") {
		return nil
	}
	out := make([]envVar, 0, len(v.pairs))
	for _, kv := range v.pairs {
		name := kv.key.value
		if kv.val.kind != nScalar {
			dc.d.errorf(kv.val.pos, "env %s must be a string, not %s", name, kv.val.kindName())
			continue
		}
		if !protocol.ValidVarName(name) {
			dc.d.warnf(kv.key.pos, "env name %q is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*); it is ignored", name)
			continue
		}
		if slices.Contains(builtinVarNames, name) {
			dc.d.warnf(kv.key.pos, "%s is a built-in variable and cannot be overridden; this value is ignored", name)
			continue
		}
		val := kv.val.value
		if kv.val.isNull() {
			val = ""
		}
		out = append(out, envVar{name: name, value: val, pos: kv.key.pos})
	}
	return out
}

func (dc *decoder) label(v *node) map[string][]string {
	out := map[string][]string{}
	if !dc.isMap(v, "label", "a map") {
		return out
	}
	for _, kv := range v.pairs {
		for _, s := range dc.strs(kv.val, "label "+kv.key.value) {
			out[kv.key.value] = append(out[kv.key.value], s.v)
		}
	}
	return out
}

// exports maps a result key of the job to the variable it sets.
func (dc *decoder) exports(v *node) map[string]string {
	if !dc.isMap(v, "exports", "a map of result keys to variable names") {
		return nil
	}
	out := map[string]string{}
	for _, kv := range v.pairs {
		s := dc.str(kv.val, "exports "+kv.key.value)
		if s == nil {
			continue
		}
		if !protocol.ValidVarName(s.v) {
			dc.d.errorf(s.pos, "exports %s: %q is not a valid variable name", kv.key.value, s.v)
			continue
		}
		out[kv.key.value] = s.v
	}
	return out
}

// parseDuration reads CNB durations: a number in defaultUnit, or a number with ms, s, m or h, or
// a Go-style compound such as 1h30m.
func parseDuration(s string, defaultUnit time.Duration) (time.Duration, error) {
	s = strings.TrimSpace(s)
	num, unit := s, defaultUnit
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}} {
		if strings.HasSuffix(s, u.suffix) {
			num, unit = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.unit
			break
		}
	}
	if f, err := strconv.ParseFloat(num, 64); err == nil && num != "" && num[0] >= '0' && num[0] <= '9' {
		if f*float64(unit) > float64(math.MaxInt64) {
			return 0, fmt.Errorf("%q is too long", s)
		}
		return time.Duration(f * float64(unit)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; use a number with ms, s, m or h, like 30m or 2h", s)
	}
	return d, nil
}

// timeout reads a job timeout: milliseconds by default.
func (dc *decoder) timeout(v *node) time.Duration {
	if v.isNull() {
		return 0
	}
	if v.kind != nScalar {
		dc.d.errorf(v.pos, "timeout must be a duration like 30m or 2h, not %s", v.kindName())
		return 0
	}
	d, err := parseDuration(v.value, time.Millisecond)
	if err != nil {
		dc.d.errorf(v.pos, "invalid timeout: %v", err)
		return 0
	}
	if d <= 0 {
		dc.d.errorf(v.pos, "timeout must be positive")
		return 0
	}
	return d
}

// lock reads true, false or a lock map; pipeline locks have more keys than stage and job ones.
func (dc *decoder) lock(v *node, pipeline bool) *lockDecl {
	if v.isNull() {
		return nil
	}
	if b, ok := boolValue(v); ok {
		if !b {
			return nil
		}
		return &lockDecl{expires: time.Hour, timeout: time.Hour}
	}
	if v.kind != nMap {
		dc.d.errorf(v.pos, "lock must be true, false or a map, not %s", v.kindName())
		return nil
	}
	l := &lockDecl{expires: time.Hour, timeout: time.Hour}
	known := []string{"key", "expires", "timeout", "wait"}
	if pipeline {
		known = append(known, "cancel-in-progress", "cancel-in-wait")
	}
	seconds := func(val *node, what string) time.Duration {
		d, err := parseDuration(val.value, time.Second)
		if err != nil || val.kind != nScalar || d <= 0 {
			dc.d.errorf(val.pos, "lock.%s must be a positive number of seconds or a duration", what)
			return time.Hour
		}
		return d
	}
	for _, kv := range v.pairs {
		k, val := kv.key.value, kv.val
		switch {
		case !slices.Contains(known, k):
			dc.unknownKey(kv.key, "lock", known)
		case k == "key":
			l.key = dc.str(val, "lock.key")
		case k == "expires":
			l.expires = seconds(val, k)
		case k == "timeout":
			l.timeout = seconds(val, k)
		case k == "wait":
			l.wait = dc.boolean(val, "lock.wait")
		case k == "cancel-in-progress":
			l.cancelInProgress = dc.boolean(val, "lock.cancel-in-progress")
		case k == "cancel-in-wait":
			l.cancelInWait = dc.boolean(val, "lock.cancel-in-wait")
		}
	}
	if l.wait && l.cancelInProgress {
		dc.d.errorf(v.pos, "lock: wait and cancel-in-progress cannot be combined")
	}
	if l.cancelInWait && !l.wait {
		dc.d.errorf(v.pos, "lock: cancel-in-wait needs wait: true")
	}
	return l
}
