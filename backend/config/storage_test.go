package config

import (
	"io"
	"strings"
	"testing"
)

func TestStorageSettings(t *testing.T) {
	c, _, err := Load("nimbus-server", nil, envOf(nil), io.Discard)
	if err != nil || c.Storage != "local" || c.S3Presign {
		t.Fatalf("default storage: %q %v", c.Storage, err)
	}
	c, _, err = Load("nimbus-server", nil, envOf(map[string]string{"NIMBUS_STORAGE": "s3",
		"NIMBUS_S3_ENDPOINT": "http://127.0.0.1:9000/", "NIMBUS_S3_BUCKET": "b", "NIMBUS_S3_PRESIGN": "true"}), io.Discard)
	if err != nil || c.S3Endpoint != "127.0.0.1:9000" || !c.S3Insecure || !c.S3Presign {
		t.Fatalf("http endpoint: %+v %v", c, err)
	}
	c, _, err = Load("nimbus-server", []string{"--storage", "s3", "--s3-endpoint", "s3.example.com", "--s3-bucket", "b"}, envOf(nil), io.Discard)
	if err != nil || c.S3Endpoint != "s3.example.com" || c.S3Insecure {
		t.Fatalf("plain endpoint: %+v %v", c, err)
	}
	for _, env := range []map[string]string{
		{"NIMBUS_STORAGE": "gcs"},
		{"NIMBUS_STORAGE": "s3", "NIMBUS_S3_BUCKET": "b"},
		{"NIMBUS_STORAGE": "s3", "NIMBUS_S3_ENDPOINT": "h:1"},
		{"NIMBUS_STORAGE": "s3", "NIMBUS_S3_ENDPOINT": "ftp://h:1", "NIMBUS_S3_BUCKET": "b"},
		{"NIMBUS_STORAGE": "s3", "NIMBUS_S3_ENDPOINT": "https://h:1/path", "NIMBUS_S3_BUCKET": "b"},
		{"NIMBUS_S3_PRESIGN": "true"},
	} {
		if _, _, err := Load("nimbus-server", nil, envOf(env), io.Discard); err == nil || !strings.Contains(err.Error(), "NIMBUS_S") {
			t.Errorf("%v: %v", env, err)
		}
	}
}
