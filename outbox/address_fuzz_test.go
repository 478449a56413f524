package outbox

import (
	"errors"
	"net"
	"net/netip"
	"testing"
)

// FuzzCheckAddress holds CheckAddress to properties that a table of ranges
// could break: every address the standard library calls loopback, private,
// link-local, multicast or unspecified is refused; an IPv4 address and its
// IPv4-mapped IPv6 form (with or without a zone) are judged alike; the
// NAT64 and 6to4 forms of an IPv4 address are refused when it is; and a
// refusal is always an *AddressError matching ErrAddressRefused.
func FuzzCheckAddress(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "10.0.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "255.255.255.255",
		"93.184.216.34", "::1", "::", "fe80::1", "fd00::1", "ff02::1", "::ffff:127.0.0.1", "64:ff9b::a00:1", "2002:a00:1::",
		"2001:db8::1", "2606:4700::1111", "8.8.8.8", "224.0.0.1", "198.18.0.1"} {
		b, _ := netip.MustParseAddr(s).MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a netip.Addr
		switch len(b) {
		case 4:
			a = netip.AddrFrom4([4]byte(b))
		case 16:
			a = netip.AddrFrom16([16]byte(b))
		default:
			if err := CheckAddress(a); !errors.Is(err, ErrAddressRefused) {
				t.Fatalf("the zero Addr: %v", err)
			}
			return
		}
		err := CheckAddress(a)
		if err != nil {
			var ae *AddressError
			if !errors.As(err, &ae) || !errors.Is(err, ErrAddressRefused) || ae.Reason == "" {
				t.Fatalf("%s: refusal %v is not an *AddressError with a reason", a, err)
			}
		}
		ip := net.IP(a.AsSlice())
		if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
			ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
			if err == nil {
				t.Fatalf("%s is not public, and was not refused", a)
			}
		}
		if a.Is6() && !a.Is4In6() {
			if zoned := CheckAddress(a.WithZone("eth0")); (zoned == nil) != (err == nil) {
				t.Fatalf("%s with a zone: %v, without: %v", a, zoned, err)
			}
			return
		}
		v4 := a.Unmap().As4()
		mapped := netip.AddrFrom16(netip.AddrFrom4(v4).As16())
		nat64 := netip.AddrFrom16([16]byte{0, 0x64, 0xff, 0x9b, 10: 0, 11: 0, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]})
		sixToFour := netip.AddrFrom16([16]byte{0x20, 0x02, v4[0], v4[1], v4[2], v4[3], 15: 1})
		base := CheckAddress(netip.AddrFrom4(v4))
		for _, other := range []netip.Addr{mapped, nat64, sixToFour} {
			if got := CheckAddress(other); (got == nil) != (base == nil) {
				t.Fatalf("%s: %v, but %s: %v", netip.AddrFrom4(v4), base, other, got)
			}
		}
	})
}
