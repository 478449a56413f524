package outbox

import (
	"fmt"
	"net/netip"
	"strings"
	"syscall"
)

// AddressError is a refused address; it matches ErrAddressRefused.
type AddressError struct {
	// Addr is the address refused; its zero value when Host is.
	Addr netip.Addr
	// Host is the name refused without a lookup (localhost).
	Host string
	// Reason names the range, such as "loopback".
	Reason string
}

func (e *AddressError) Error() string {
	what := e.Host
	if e.Addr.IsValid() {
		what = e.Addr.String()
	}
	return fmt.Sprintf("outbox: webhook address %s refused: %s (a delivery that must reach it needs allow_private_addresses)", what, e.Reason)
}

func (e *AddressError) Unwrap() error { return ErrAddressRefused }

// refusedRange is a range of addresses and why it is refused.
type refusedRange struct {
	prefix netip.Prefix
	reason string
	// embedded, when set, is the byte offset of an IPv4 address the range
	// carries: the address is refused exactly when that IPv4 address is.
	embedded int
}

// refusedRanges are the ranges CheckAddress refuses, from the IANA
// special-purpose registries (RFC 6890 and its updates). IPv4-mapped
// IPv6 addresses are unmapped before the lookup.
var refusedRanges = func() []refusedRange {
	var out []refusedRange
	add := func(prefix, reason string, embedded int) {
		out = append(out, refusedRange{netip.MustParsePrefix(prefix), reason, embedded})
	}
	add("0.0.0.0/8", "unspecified (this network)", 0)
	add("10.0.0.0/8", "private", 0)
	add("100.64.0.0/10", "shared address space (CGNAT)", 0)
	add("127.0.0.0/8", "loopback", 0)
	add("169.254.0.0/16", "link-local", 0)
	add("172.16.0.0/12", "private", 0)
	add("192.0.0.0/24", "IETF protocol assignments", 0)
	add("192.0.2.0/24", "documentation", 0)
	add("192.88.99.0/24", "6to4 relay anycast", 0)
	add("192.168.0.0/16", "private", 0)
	add("198.18.0.0/15", "benchmarking", 0)
	add("198.51.100.0/24", "documentation", 0)
	add("203.0.113.0/24", "documentation", 0)
	add("224.0.0.0/4", "multicast", 0)
	add("240.0.0.0/4", "reserved or broadcast", 0)
	add("::/128", "unspecified", 0)
	add("::1/128", "loopback", 0)
	add("::/96", "IPv4-compatible (deprecated)", 0)
	add("::ffff:0:0:0/96", "IPv4-translated", 0)
	add("64:ff9b::/96", "", 12) // NAT64: as the IPv4 address it reaches
	add("64:ff9b:1::/48", "local-use NAT64", 0)
	add("100::/64", "discard-only", 0)
	add("2001::/32", "Teredo", 0)
	add("2001:10::/28", "ORCHID (deprecated)", 0)
	add("2001:20::/28", "ORCHIDv2", 0)
	add("2001:db8::/32", "documentation", 0)
	add("2002::/16", "", 2) // 6to4: as the IPv4 address it embeds
	add("3fff::/20", "documentation", 0)
	add("fc00::/7", "unique local (private)", 0)
	add("fe80::/10", "link-local", 0)
	add("fec0::/10", "site-local (deprecated)", 0)
	add("ff00::/8", "multicast", 0)
	return out
}()

// CheckAddress returns an *AddressError when the deliverer refuses to
// connect to addr without WebhookOptions.AllowPrivateAddresses, and nil
// for a public address. An IPv6 zone is ignored; an invalid address is
// refused.
func CheckAddress(addr netip.Addr) error {
	if !addr.IsValid() {
		return &AddressError{Addr: addr, Reason: "not an IP address"}
	}
	a := addr.WithZone("").Unmap()
	for _, r := range refusedRanges {
		if !r.prefix.Contains(a) {
			continue
		}
		if r.embedded == 0 {
			return &AddressError{Addr: addr, Reason: r.reason}
		}
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte(b[r.embedded : r.embedded+4]))
		if err := CheckAddress(v4); err != nil {
			return &AddressError{Addr: addr, Reason: err.(*AddressError).Reason + " (embedded " + v4.String() + ")"}
		}
		return nil
	}
	return nil
}

// checkHost refuses, when the URL is parsed, a host that names a refused
// address literally or is a name that always means loopback (RFC 6761's
// localhost). Other names are checked when the deliverer connects.
func checkHost(host string) error {
	if a, err := netip.ParseAddr(host); err == nil {
		return CheckAddress(a)
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return &AddressError{Host: host, Reason: "loopback"}
	}
	return nil
}

// controlDial is a net.Dialer's Control: it checks the address the socket
// is about to connect to, after every name was resolved, so that no DNS
// answer (even one that changes between two lookups) reaches a refused
// address.
func controlDial(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &AddressError{Host: address, Reason: "not an IP address and port"}
	}
	return CheckAddress(ap.Addr())
}
