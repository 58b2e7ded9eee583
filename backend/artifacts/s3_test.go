package artifacts_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/internal/testenv"
)

// On S3 with presigned downloads (NIMBUS_S3_PRESIGN): publishing streams into the bucket (with
// and without the checksum, so through Put and through an upload session), a GET is a 307 to a
// presigned URL that serves the bytes and their ranges without Nimbus's credentials, HEAD is
// answered by Nimbus, and a refused upload leaves nothing in the bucket.
func TestPresignedDownloadsFromS3(t *testing.T) {
	s3 := testenv.S3Server(t)
	w := newWorld(t, false, map[string]string{"NIMBUS_STORAGE": "s3", "NIMBUS_S3_ENDPOINT": "http://" + s3.Endpoint,
		"NIMBUS_S3_BUCKET": fmt.Sprintf("%s-files-%x", s3.Bucket, time.Now().UnixNano()), "NIMBUS_S3_ACCESS_KEY": s3.AccessKey,
		"NIMBUS_S3_SECRET_KEY": s3.SecretKey, "NIMBUS_S3_PRESIGN": "true"})
	big, small := randomBytes(20<<20+123), randomBytes(1000)
	if r := w.put("job", apiBase+"/m/v1/big.bin", big, true); r.Status != http.StatusCreated {
		t.Fatalf("push with checksum: %d %s", r.Status, r.Body)
	}
	if r := w.put("job", apiBase+"/m/v1/small.bin", small, false); r.Status != http.StatusCreated {
		t.Fatalf("push without checksum: %d %s", r.Status, r.Body)
	}
	before := w.blobs()
	if r := w.do("job", "PUT", apiBase+"/m/v1/bad.bin", small, "X-Checksum-Sha256", sha256Hex(big)); r.Status != http.StatusBadRequest {
		t.Fatalf("wrong checksum: %d", r.Status)
	}
	if len(w.blobs()) != len(before) || w.uploads() != 0 {
		t.Fatal("a refused upload left objects in the bucket")
	}
	r := w.do("deploy", "GET", apiBase+"/m/v1/big.bin", nil)
	loc := r.Header.Get("Location")
	if r.Status != http.StatusTemporaryRedirect || loc == "" {
		t.Fatalf("GET: %d %v", r.Status, r.Header)
	}
	req, _ := http.NewRequest("GET", loc, nil)
	req.Header.Set("Range", "bytes=1000-")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusPartialContent || !bytes.Equal(got, big[1000:]) {
		t.Fatalf("the presigned URL with a range: %d, %d bytes", res.StatusCode, len(got))
	}
	if r := w.do("deploy", "HEAD", apiBase+"/m/v1/small.bin", nil); r.Status != http.StatusOK || r.Header.Get("Content-Length") != "1000" {
		t.Fatalf("HEAD: %d %v", r.Status, r.Header)
	}
}
