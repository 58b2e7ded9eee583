package app

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Bad input on the model-file routes. The body of an upload is the raw file (not JSON), so
// there are no generic JSON cases; every refused upload also leaves the store as it was (the
// artifacts package's own tests check the store; here the database). A ".." or NUL in the URL
// is refused by the server's edge (400) before the artifacts' own name rule sees it.

// mxFile is A's private repo's file path of package model, version {v}.
const mxFile = mxAPriv + "/artifacts/model/{v}/weights.bin"

// mxPublishedFile sets {v} to a fresh version and {pub} to a version whose weights.bin is
// published (mxWeights).
func mxPublishedFile(w *mxWorld, v map[string]string) {
	v["v"] = w.unique("v")
	v["pub"] = w.unique("pub")
	w.publish(mxPrivA, v["pub"])
}

func mxSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var mxBadArtifactEndpoints = []mxBadEndpoint{
	{Method: "PUT", Path: mxFile, Setup: mxPublishedFile,
		Cases: []mxBad{
			// A "." or ".." segment or a control character never reaches the route: the edge
			// refuses the URL (400). Names that break the path rule (internal/userpath) are a 400
			// naming them and why; names outside a name's alphabet a 422.
			{Name: "package ..", Path: mxAPriv + "/artifacts/../{v}/weights.bin", Body: mxWeights, Want: 400, InMsg: `the URL path has a ".." segment`},
			{Name: "version ..", Path: mxAPriv + "/artifacts/model/../weights.bin", Body: mxWeights, Want: 400, InMsg: `".." segment`},
			{Name: "file ..", Path: mxAPriv + "/artifacts/model/{v}/..", Body: mxWeights, Want: 400, InMsg: `".." segment`},
			{Name: "encoded ..", Path: mxAPriv + "/artifacts/model/{v}/%2e%2e", Body: mxWeights, Want: 400, InMsg: `".." segment`},
			{Name: "encoded slash", Path: mxAPriv + "/artifacts/model/{v}/..%2Fsecrets", Body: mxWeights, Want: 400, InMsg: `".." segment`},
			{Name: "backslash", Path: mxAPriv + "/artifacts/model/{v}/..%5Cx", Body: mxWeights, Want: 400, InMsg: "backslash"},
			{Name: "NUL byte", Path: mxAPriv + "/artifacts/model/{v}/a%00b", Body: mxWeights, Want: 400, InMsg: "control character"},
			{Name: "hidden file", Path: mxAPriv + "/artifacts/model/{v}/.env", Body: mxWeights, Want: 422, Field: "file"},
			{Name: "package like an option", Path: mxAPriv + "/artifacts/-rf/{v}/weights.bin", Body: mxWeights, Want: 422, Field: "package"},
			{Name: "version latest", Path: mxAPriv + "/artifacts/model/latest/weights.bin", Body: mxWeights, Want: 422, Field: "version"},
			{Name: "file name of 256 characters", Path: mxAPriv + "/artifacts/model/{v}/" + mxLong(256), Body: mxWeights, Want: 400,
				InMsg: "segment of 256 bytes"},
			{Name: "wrong X-Checksum-Sha256", Body: mxWeights, Want: 400, Header: map[string]string{"X-Checksum-Sha256": mxSHA256("other")}},
			{Name: "malformed X-Checksum-Sha256", Body: mxWeights, Want: 400, Header: map[string]string{"X-Checksum-Sha256": "xyz"}},
			{Name: "wrong Digest", Body: mxWeights, Want: 400,
				Header: map[string]string{"Digest": "sha-256=" + base64.StdEncoding.EncodeToString(make([]byte, 32))}},
			{Name: "checksum headers that disagree", Body: mxWeights, Want: 400, Header: map[string]string{
				"X-Checksum-Sha256": mxSHA256(mxWeights), "Digest": "sha-256=" + base64.StdEncoding.EncodeToString(make([]byte, 32))}},
			{Name: "other content under a published name", Path: mxAPriv + "/artifacts/model/{pub}/weights.bin", Body: "other weights", Want: 409},
			{Name: "the same content again: a no-op", Path: mxAPriv + "/artifacts/model/{pub}/weights.bin", Body: mxWeights, Want: 200},
			{Name: "the same content, with its checksum", Path: mxAPriv + "/artifacts/model/{pub}/weights.bin", Body: mxWeights, Want: 200,
				Header: map[string]string{"X-Checksum-Sha256": mxSHA256(mxWeights)}},
			{Name: "over the team's quota", Body: strings.Repeat("w", 1<<20+1), Want: 413},
			{Name: "over the quota, with its checksum", Body: strings.Repeat("w", 1<<20+1), Want: 413,
				Header: map[string]string{"X-Checksum-Sha256": mxSHA256(strings.Repeat("w", 1<<20+1))}},
			{Name: "a reporter", As: "reporter", Body: mxWeights, Want: 403},
			{Name: "the deploy token", As: "deploy-token", Body: mxWeights, Want: 403},
			{Name: "a token without registry:write", As: "noscope-token", Body: mxWeights, Want: 403},
			{Name: "another team's repo", Path: mxBPriv + "/artifacts/model/{v}/weights.bin", Body: mxWeights, Want: 404},
			{Name: "no such repo", Path: "/api/v1/repos/" + mxOrgA + "/" + mxGhostRepo + "/artifacts/model/{v}/weights.bin", Body: mxWeights, Want: 404},
		}},
	{Method: "DELETE", Path: mxFile, Setup: mxPublishedFile,
		Cases: []mxBad{
			{Name: "no such file", Path: mxAPriv + "/artifacts/model/{pub}/nope.bin", Want: 404},
			{Name: "no such version", Path: mxFile, Want: 404},
			{Name: "through latest", Path: mxAPriv + "/artifacts/model/latest/weights.bin", Want: 404},
			{Name: "path traversal", Path: mxAPriv + "/artifacts/model/{pub}/..", Want: 400},
			{Name: "a developer", As: "developer", Path: mxAPriv + "/artifacts/model/{pub}/weights.bin", Want: 403},
			{Name: "the job token", As: "job-token", Path: mxAPriv + "/artifacts/model/{pub}/weights.bin", Want: 403},
			{Name: "another team's repo", Path: mxBPriv + "/artifacts/model/{pub}/weights.bin", Want: 404},
		}},
	{Method: "DELETE", Path: mxAPriv + "/artifacts/model/{v}", Setup: mxPublishedFile,
		Cases: []mxBad{
			{Name: "no such version", Want: 404},
			{Name: "no such package", Path: mxAPriv + "/artifacts/nope/{pub}", Want: 404},
			{Name: "latest", Path: mxAPriv + "/artifacts/model/latest", Want: 404},
			{Name: "version ..", Path: mxAPriv + "/artifacts/model/..", Want: 400},
			{Name: "a developer", As: "developer", Path: mxAPriv + "/artifacts/model/{pub}", Want: 403},
			{Name: "the deploy token", As: "deploy-token", Path: mxAPriv + "/artifacts/model/{pub}", Want: 403},
		}},
}
