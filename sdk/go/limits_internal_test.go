package workhorse

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// The embedded limits.json is the repository's sdk/protocol/limits.json, and this SDK reads every
// value of it: decoded strictly (no key without a field) and encoded again, it is the source.
func TestLimitsAreTheProtocolFile(t *testing.T) {
	source, err := os.ReadFile(filepath.Join("..", "protocol", "limits.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(source, limitsJSON) {
		t.Fatal("sdk/go/limits.json differs from sdk/protocol/limits.json: run node scripts/copy-sdk-sql.js")
	}
	decoder := json.NewDecoder(bytes.NewReader(source))
	decoder.DisallowUnknownFields()
	var strict protocolLimits
	if err := decoder.Decode(&strict); err != nil {
		t.Fatalf("limits.json has a key this SDK does not read: %v", err)
	}
	again, _ := json.Marshal(limits)
	var want, got any
	_ = json.Unmarshal(source, &want)
	_ = json.Unmarshal(again, &got)
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("the parsed limits differ from limits.json:\n got %s\nwant %s", again, source)
	}
	// What the conformance test of limits compares across SDKs (test/package/limits.test.ts).
	if path := os.Getenv("WORKHORSE_LIMITS_OUT"); path != "" {
		if err := os.WriteFile(path, again, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A heartbeat at or above the lease is refused, naming heartbeatMs, with the message every SDK gives.
func TestHeartbeatBelowLease(t *testing.T) {
	for _, o := range []WorkerOptions{
		{Lease: 3 * 1e9, Heartbeat: 5 * 1e9},
		{Lease: 3 * 1e9, Heartbeat: 3 * 1e9},
	} {
		_, err := checkWorkerOptions(o)
		v, ok := err.(*ValidationError)
		if !ok || v.Field != "heartbeatMs" || v.Message != heartbeatNotBelowLease(3000) {
			t.Fatalf("options %+v: got %v", o, err)
		}
	}
	if _, err := checkWorkerOptions(WorkerOptions{Lease: 3 * 1e9, Heartbeat: 2999 * 1e6}); err != nil {
		t.Fatalf("a heartbeat just below the lease: %v", err)
	}
	s, err := checkWorkerOptions(WorkerOptions{})
	if err != nil || s.leaseMs != 30000 || s.heartbeat.Milliseconds() != 10000 || s.concurrency != 10 {
		t.Fatalf("defaults: %+v %v", s, err)
	}
}

// The years a time may take are limits.json's, checked when a time.Time becomes ISO text.
func TestTheDateRangeIsThatOfLimitsJSON(t *testing.T) {
	low, high := limits.Dates.MinYear, limits.Dates.MaxYear
	for _, year := range []int{low, high} {
		if _, err := checkTime(time.Date(year, 6, 1, 0, 0, 0, 0, time.UTC), "at"); err != nil {
			t.Fatalf("year %d: %v", year, err)
		}
	}
	for _, year := range []int{low - 1, high + 1} {
		_, err := checkTime(time.Date(year, 6, 1, 0, 0, 0, 0, time.UTC), "at")
		if v, ok := err.(*ValidationError); !ok || v.Field != "at" {
			t.Fatalf("year %d: got %v", year, err)
		}
	}
}
