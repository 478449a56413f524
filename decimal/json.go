package decimal

import "fmt"

// MarshalJSON encodes d as a JSON string holding its canonical text, such as
// "12.50". A string rather than a JSON number, because many JSON decoders
// turn numbers into binary floating point and would lose exactness.
//
// There is deliberately no UnmarshalJSON: the text does not carry the scale
// ("12.5" may be money at scale 2 or a quantity at scale 3), so decoding must
// be told it. Use ParseJSON with the declared scale.
func (d Decimal) MarshalJSON() ([]byte, error) {
	buffer := make([]byte, 0, textLengthCanonicalMax+2)
	buffer = append(buffer, '"')
	buffer = d.Append(buffer)
	buffer = append(buffer, '"')
	return buffer, nil
}

// ParseJSON decodes a JSON string such as "12.50" (quotes included, as in a
// json.RawMessage) at exactly the given scale, with Parse's rules. A JSON
// number, null, surrounding whitespace or an escape sequence is ErrSyntax:
// MarshalJSON never produces them, and accepting them would invite
// float-formatted input.
func ParseJSON(data []byte, scale uint8) (Decimal, error) {
	// Check the length before converting to a string, so that oversized
	// input is not copied.
	if len(data) > TextLengthMax+2 {
		return Decimal{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTextLength, len(data), TextLengthMax+2)
	}
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return Decimal{}, fmt.Errorf("%w: not a JSON string: %q", ErrSyntax, data)
	}
	return Parse(string(data[1:len(data)-1]), scale)
}
