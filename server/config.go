package server

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Duration is a time.Duration written as Go writes one ("30s") in a
// configuration file.
type Duration time.Duration

// UnmarshalJSON parses "30s", "5m", …
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Config is the configuration file of ledgerctl serve (--config): the
// webhook providers and the delivered outbox topics, which hold secrets
// and lists that flags express badly. Unknown fields are refused.
type Config struct {
	Providers  []Provider `json:"providers"`
	Deliveries []Delivery `json:"deliveries"`
}

// ReadConfig reads and checks a configuration file.
func ReadConfig(path string) (Config, error) {
	var c Config
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if _, err := newProviders(c.Providers); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := checkDeliveries(c.Deliveries, 0); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}
