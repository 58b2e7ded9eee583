package runner

import (
	"bytes"
	"reflect"
)

// What a run sends back to the server to be stored or shown passes through maskReport on its
// way out: events (exports, metrics, the image, at deliverEvents), the finish (its reason), a
// release's title and notes, the builds cnb:apply and cnb:trigger start, the keys cnb:resolve
// and cnb:await name and the data resolved, the locks of stages and jobs. Every string in such a
// value is masked — struct fields, map keys and values, elements, at any depth — with the run's
// secrets as they stand when it is sent, so a field added to one of these types tomorrow is
// masked without anyone remembering (TestMaskReportWalksEveryField plants a secret in every
// field of each). Logs are masked as they stream (jobLog); TestClientCallsAreClassified makes a
// new call of the agent's client say which it is.
//
// Not masked, because the server must act on the value itself: an import's URL (the file to
// read), cnb:trigger's token (checked, never stored) and the bytes of a release's files
// (artifacts, which GitHub Actions does not mask either). A release's tag and its files' names
// are what a release and its files are stored under: one that holds a secret is refused with a
// message rather than published under a name that is not the one asked for (release.go), as a
// metric whose name or value holds one is left out with a note (metricValues).

// maskReport returns a copy of v in which every string is masked with secrets. v is left as it
// is: its maps may still be read elsewhere (a job's exports feed later jobs unmasked).
func maskReport[T any](v T, secrets []string) T {
	m := newReportMasker(secrets)
	if len(m.m.secrets) == 0 {
		return v
	}
	return m.walk(reflect.ValueOf(&v).Elem()).Interface().(T)
}

// reportMasker masks whole strings, one after the other, with one masker.
type reportMasker struct {
	m   *masker
	buf bytes.Buffer
}

func newReportMasker(secrets []string) *reportMasker {
	r := &reportMasker{}
	r.m = newMasker(&r.buf, secrets)
	return r
}

// holds says whether s holds a secret.
func (r *reportMasker) holds(s string) bool { return r.string(s) != s }

func (r *reportMasker) string(s string) string {
	r.buf.Reset()
	r.m.Write([]byte(s))
	r.m.Flush()
	return r.buf.String()
}

// walk returns a masked copy of v, which it never changes. Unexported fields are copied as they
// are (a time.Time's); a map whose keys mask to the same string keeps one of their values.
func (r *reportMasker) walk(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		return reflect.ValueOf(r.string(v.String())).Convert(v.Type())
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(r.walk(v.Field(i)))
			}
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(r.walk(it.Key()), r.walk(it.Value()))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(r.walk(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(r.walk(v.Index(i)))
		}
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(r.walk(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(r.walk(v.Elem()))
		return out
	}
	return v
}
