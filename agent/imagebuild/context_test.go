package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// entries reads a tar stream into name → kind and content ("dir", "link:<target>", or the
// file's bytes).
func entries(t *testing.T, b []byte) (names []string, got map[string]string) {
	t.Helper()
	got = map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, got
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			got[h.Name] = "dir"
		case tar.TypeSymlink:
			got[h.Name] = "link:" + h.Linkname
		default:
			c, _ := io.ReadAll(tr)
			got[h.Name] = string(c)
		}
	}
}

func TestContextHoldsOnlyTheDockerfileAndBy(t *testing.T) {
	files := baseFiles()
	files["docker/Dockerfile"] = "FROM x\n"
	files["deps/link"] = "->a.txt"
	files["secret.env"] = "TOKEN=x\n"
	_, root := checkout(t, files)
	var buf bytes.Buffer
	s := Spec{Dockerfile: "docker/Dockerfile", By: []string{"deps", "requirements.txt", "./deps/a.txt"}}
	if err := WriteContext(&buf, root, s); err != nil {
		t.Fatal(err)
	}
	names, got := entries(t, buf.Bytes())
	want := map[string]string{
		"docker/":           "dir",
		"docker/Dockerfile": "FROM x\n",
		"deps/":             "dir",
		"deps/a.txt":        "a\n",
		"deps/link":         "link:a.txt",
		"deps/sub/":         "dir",
		"deps/sub/b.txt":    "b\n",
		"requirements.txt":  "torch==2\n",
	}
	if len(got) != len(want) || len(names) != len(want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if slices.Index(names, "docker/") > slices.Index(names, "docker/Dockerfile") {
		t.Errorf("a folder after its file: %v", names)
	}
}

func TestContextRefusesPathsOutOfTheCheckout(t *testing.T) {
	files := baseFiles()
	files["escape"] = "->/etc"
	cases := []struct {
		name string
		by   []string
		want string
	}{
		{"absolute", []string{"/etc/passwd"}, "stay inside"},
		{"above", []string{"../x"}, "stay inside"},
		// The path rule (internal/userpath) holds here too: a backslash or a newline was looked
		// up in the checkout as it was.
		{"backslash", []string{`docker\Dockerfile`}, "backslash"},
		{"newline", []string{"a\nb"}, "control character"},
		{"through a link", []string{"escape/passwd"}, "escapes"},
		{"missing", []string{"nope"}, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, root := checkout(t, files)
			err := WriteContext(io.Discard, root, Spec{Dockerfile: "Dockerfile", By: c.by})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	// The link itself is fine: it goes in as a link, and nothing of /etc with it.
	_, root := checkout(t, files)
	var buf bytes.Buffer
	if err := WriteContext(&buf, root, Spec{Dockerfile: "Dockerfile", By: []string{"escape"}}); err != nil {
		t.Fatal(err)
	}
	if _, got := entries(t, buf.Bytes()); len(got) != 2 || got["escape"] != "link:/etc" {
		t.Fatalf("entries %v", got)
	}
}

func TestCopyMessages(t *testing.T) {
	stream := `{"stream":"Step 1/2 : FROM busybox\n"}
{"status":"Preparing","id":"abc"}
{"status":"Pushing","id":"abc","progress":"[=>  ] 1kB/2kB","progressDetail":{"current":1,"total":2}}
{"status":"Pushed","progressDetail":{},"id":"abc"}
{"aux":{"Tag":"v1","Digest":"sha256:d1","Size":528}}
{"stream":"hello\n"}
{"errorDetail":{"code":3,"message":"The command '/bin/sh -c exit 3' returned a non-zero code: 3"},"error":"The command '/bin/sh -c exit 3' returned a non-zero code: 3"}
{"stream":"never read\n"}`
	var out bytes.Buffer
	aux, err := copyMessages(&out, strings.NewReader(stream))
	if err == nil || err.Error() != "The command '/bin/sh -c exit 3' returned a non-zero code: 3" {
		t.Fatalf("err %v", err)
	}
	if want := "Step 1/2 : FROM busybox\nabc: Preparing\nabc: Pushed\nhello\n"; out.String() != want {
		t.Fatalf("out %q, want %q", out.String(), want)
	}
	if len(aux) != 1 || !strings.Contains(string(aux[0]), "sha256:d1") {
		t.Fatalf("aux %s", aux)
	}
}

func TestRegistryHost(t *testing.T) {
	for ref, want := range map[string]string{
		"127.0.0.1:8080/ml/app/nimbus-cache:abc": "127.0.0.1:8080",
		"docker.cnb.cool/ml/app":                 "docker.cnb.cool",
		"localhost/x":                            "localhost",
		"busybox":                                "",
		"library/busybox:1":                      "",
	} {
		if got := registryHost(ref); got != want {
			t.Errorf("%s: %q, want %q", ref, got, want)
		}
	}
}
