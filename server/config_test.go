package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "serve.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// deliveryConfig is a configuration file of one delivery with extra
// fields appended.
func deliveryConfig(extra string) string {
	return `{"deliveries":[{"tenant":"acme","topic":"business-events","url":"http://127.0.0.1:9/hooks",` +
		`"allow_private_addresses":true,"secret":"` + whsec + `"` +
		extra + `}]}`
}

// max_age is read as a Go duration, zero or absent meaning the outbox's
// default; a negative setting is a *DeliveryError wrapping
// ErrNegativeSetting; a duration without a unit or as a number is refused.
func TestReadConfigMaxAge(t *testing.T) {
	for _, tc := range []struct {
		extra string
		want  time.Duration
	}{
		{``, 0},
		{`,"max_age":"0s"`, 0},
		{`,"max_age":"2400h"`, 2400 * time.Hour},
	} {
		c, err := server.ReadConfig(writeConfig(t, deliveryConfig(tc.extra)))
		if err != nil {
			t.Fatalf("%q: %v", tc.extra, err)
		}
		if got := time.Duration(c.Deliveries[0].MaxAge); got != tc.want {
			t.Errorf("%q: max_age %v, want %v", tc.extra, got, tc.want)
		}
	}
	for _, extra := range []string{`,"max_age":"-1h"`, `,"timeout":"-1s"`, `,"max_attempts":-1`, `,"concurrency":-2`} {
		_, err := server.ReadConfig(writeConfig(t, deliveryConfig(extra)))
		var de *server.DeliveryError
		if !errors.Is(err, server.ErrNegativeSetting) || !errors.As(err, &de) || de.Tenant != "acme" || de.Topic != api.TopicDefault {
			t.Errorf("%q: %v, want a DeliveryError of acme/%s wrapping ErrNegativeSetting", extra, err, api.TopicDefault)
		}
	}
	for _, extra := range []string{`,"max_age":"72"`, `,"max_age":3600`, `,"max_age":"soon"`} {
		if _, err := server.ReadConfig(writeConfig(t, deliveryConfig(extra))); err == nil {
			t.Errorf("%q accepted", extra)
		}
	}
	// A bad URL is a DeliveryError too, wrapping the outbox's error.
	_, err := server.ReadConfig(writeConfig(t, `{"deliveries":[{"tenant":"acme","topic":"business-events","url":"ftp://x","secret":"`+whsec+`"}]}`))
	var de *server.DeliveryError
	if !errors.As(err, &de) || errors.Is(err, server.ErrNegativeSetting) {
		t.Errorf("bad URL: %v", err)
	}
	// Options built by a program are checked as a file is.
	_, err = server.New(server.Options{DB: openBolt(t), Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault,
		URL: "http://127.0.0.1:9/hooks", Secret: whsec, MaxAge: server.Duration(-time.Second)}}})
	if !errors.Is(err, server.ErrNegativeSetting) {
		t.Fatalf("New with a negative MaxAge: %v", err)
	}
}
