package valuations

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// Payloads are JSON with a fixed field order, amounts as decimal strings at
// their declared scale. Encoding is deterministic (the same request always
// gives the same bytes, so a retry fingerprints the same) and decoding is
// strict: unknown fields, missing fields, other spellings of a number and
// any byte that the encoder would not have written are refused, by decoding
// and then requiring that re-encoding gives back the input exactly.

// itemPayload is the payload of TypeItem.
type itemPayload struct {
	Tenant        string `json:"tenant"`
	Item          string `json:"item"`
	Method        string `json:"method"`
	QuantityScale uint8  `json:"quantityScale"`
	Currency      string `json:"currency"`
	MinorUnit     uint8  `json:"minorUnit"`
	NegativeStock string `json:"negativeStock"` // "reject" or "allow"
}

const (
	negativeReject = "reject"
	negativeAllow  = "allow"
)

func encodeItem(it Item) []byte {
	policy := negativeReject
	if it.AllowNegative {
		policy = negativeAllow
	}
	return mustMarshal(itemPayload{Tenant: it.Tenant, Item: it.ID, Method: it.Method.String(),
		QuantityScale: it.QuantityScale, Currency: it.Currency, MinorUnit: it.MinorUnit, NegativeStock: policy})
}

// decodeItem decodes and validates a TypeItem payload.
func decodeItem(data []byte) (Item, error) {
	var p itemPayload
	if err := decodeStrict(data, &p); err != nil {
		return Item{}, err
	}
	method, err := ParseMethod(p.Method)
	if err != nil || p.Method != method.String() {
		return Item{}, payloadError("method %q", p.Method)
	}
	if p.NegativeStock != negativeReject && p.NegativeStock != negativeAllow {
		return Item{}, payloadError("negativeStock %q", p.NegativeStock)
	}
	it := Item{Tenant: p.Tenant, ID: p.Item, Method: method, QuantityScale: p.QuantityScale,
		Currency: p.Currency, MinorUnit: p.MinorUnit, AllowNegative: p.NegativeStock == negativeAllow}
	if _, err := it.validate(); err != nil {
		return Item{}, payloadError("%v", err)
	}
	return it, nil
}

// Operation kinds, as written in payloads.
const (
	kindReceipt    = "receipt"
	kindIssue      = "issue"
	kindAdjustment = "adjustment"
	kindTransfer   = "transfer"
	kindReversal   = "reversal"
)

// request is the canonical form of an operation request. Both entries of an
// operation carry it, so either half alone says what the operation was, and
// a retry is recognised by comparing requests rather than computed values.
type request struct {
	Kind       string `json:"kind"`
	Tenant     string `json:"tenant"`
	Item       string `json:"item"`
	Location   string `json:"location"`
	Operation  string `json:"operation"`
	Quantity   string `json:"quantity,omitempty"`
	UnitCost   string `json:"unitCost,omitempty"`
	Value      string `json:"value,omitempty"`
	ToLocation string `json:"toLocation,omitempty"`
	Reverses   string `json:"reverses,omitempty"`
}

// Legs of two-location operations, as written in payloads.
const (
	legSource      = "source"
	legDestination = "destination"
)

// quantityPayload is the payload of TypeQuantity.
type quantityPayload struct {
	Request        request `json:"request"`
	Leg            string  `json:"leg,omitempty"`
	QuantityChange string  `json:"quantityChange"`
	QuantityAfter  string  `json:"quantityAfter"`
}

// Effect kinds: the primitive an entry applied, with its inputs, so that
// Check can re-apply it without looking anywhere else.
const (
	effectInflow       = "inflow"
	effectInflowFront  = "inflow_front"
	effectOutflow      = "outflow"
	effectRemoveInflow = "remove_inflow"
	effectRevalue      = "revalue"
)

type effectRecord struct {
	Kind     string `json:"kind"`
	Quantity string `json:"quantity,omitempty"`
	Value    string `json:"value,omitempty"`
	Rate     string `json:"rate,omitempty"`
	Layer    uint64 `json:"layer,omitempty"`
}

type settlementRecord struct {
	Operation  string `json:"operation"`
	Quantity   string `json:"quantity"`
	Estimated  string `json:"estimated"`
	Actual     string `json:"actual"`
	Correction string `json:"correction"`
}

// valuePayload is the payload of TypeValue.
type valuePayload struct {
	Request       request            `json:"request"`
	Leg           string             `json:"leg,omitempty"`
	Method        string             `json:"method"`
	Effect        effectRecord       `json:"effect"`
	ValueChange   string             `json:"valueChange"`
	QuantityAfter string             `json:"quantityAfter"`
	ValueAfter    string             `json:"valueAfter"`
	RateAfter     string             `json:"rateAfter,omitempty"`
	Settlements   []settlementRecord `json:"settlements,omitempty"`
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("valuations: encoding %T: %v", v, err)) // plain structs of strings and integers
	}
	return b
}

func payloadError(format string, args ...any) error {
	return invalid(ErrInvalidPayload, format, args...)
}

// decodeStrict decodes data into v and requires data to be exactly what the
// encoder writes for v.
func decodeStrict(data []byte, v any) error {
	if len(data) > chain.PayloadSizeLimit {
		return payloadError("%d bytes", len(data))
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return payloadError("%v", err)
	}
	again, err := json.Marshal(v)
	if err != nil || !bytes.Equal(again, data) {
		return payloadError("not in canonical form")
	}
	return nil
}

// inferScale returns the number of digits after the point of a decimal text.
func inferScale(text string) (uint8, error) {
	i := strings.IndexByte(text, '.')
	if i < 0 {
		return 0, nil
	}
	if n := len(text) - i - 1; n <= decimal.ScaleMax {
		return uint8(n), nil
	}
	return 0, payloadError("%q has too many decimal places", text)
}

// parseCanonical parses text at scale and requires it to be the canonical
// text of its value, so that one amount has one spelling.
func parseCanonical(field, text string, scale uint8) (int64, error) {
	d, err := decimal.Parse(text, scale)
	if err != nil || d.String() != text {
		return 0, payloadError("%s %q is not a canonical decimal at scale %d", field, text, scale)
	}
	return d.Units(), nil
}

// decodedQuantity is a decoded TypeQuantity payload.
type decodedQuantity struct {
	payload quantityPayload
	change  int64
	after   int64
	scale   uint8
}

func decodeQuantity(data []byte) (decodedQuantity, error) {
	var d decodedQuantity
	if err := decodeStrict(data, &d.payload); err != nil {
		return d, err
	}
	p := &d.payload
	var err error
	if d.scale, err = inferScale(p.QuantityAfter); err != nil {
		return d, err
	}
	if d.after, err = parseCanonical("quantityAfter", p.QuantityAfter, d.scale); err != nil {
		return d, err
	}
	if d.change, err = parseCanonical("quantityChange", p.QuantityChange, d.scale); err != nil {
		return d, err
	}
	if err := checkLeg(p.Request, p.Leg); err != nil {
		return d, err
	}
	_, err = parseRequest(p.Request, scales{quantity: d.scale, minor: 0}, false)
	return d, err
}

// decodedValue is a decoded TypeValue payload with its amounts as units.
type decodedValue struct {
	payload     valuePayload
	method      Method
	scales      scales
	effect      effect
	change      int64
	quantity    int64 // after
	value       int64 // after
	rate        int64 // after
	rateKnown   bool
	settlements []settlementAmounts
}

// effect is a decoded effectRecord.
type effect struct {
	kind      string
	quantity  int64
	value     int64
	rate      int64
	rateGiven bool
	layer     uint64
}

func decodeValue(data []byte) (decodedValue, error) {
	var d decodedValue
	if err := decodeStrict(data, &d.payload); err != nil {
		return d, err
	}
	p := &d.payload
	var err error
	if d.method, err = ParseMethod(p.Method); err != nil || p.Method != d.method.String() {
		return d, payloadError("method %q", p.Method)
	}
	if d.scales.quantity, err = inferScale(p.QuantityAfter); err != nil {
		return d, err
	}
	if d.scales.minor, err = inferScale(p.ValueAfter); err != nil {
		return d, err
	}
	s := d.scales
	if s.quantity > QuantityScaleMax || s.minor > MinorUnitMax {
		return d, payloadError("scales %d and %d out of range", s.quantity, s.minor)
	}
	fields := []struct {
		name  string
		text  string
		scale uint8
		units *int64
	}{
		{"quantityAfter", p.QuantityAfter, s.quantity, &d.quantity},
		{"valueAfter", p.ValueAfter, s.minor, &d.value},
		{"valueChange", p.ValueChange, s.minor, &d.change},
	}
	for _, f := range fields {
		if *f.units, err = parseCanonical(f.name, f.text, f.scale); err != nil {
			return d, err
		}
	}
	if p.RateAfter != "" {
		if d.rate, err = parseCanonical("rateAfter", p.RateAfter, s.rate()); err != nil {
			return d, err
		}
		d.rateKnown = true
	}
	if d.effect, err = decodeEffect(p.Effect, s); err != nil {
		return d, err
	}
	for _, st := range p.Settlements {
		a := settlementAmounts{operation: st.Operation}
		if a.quantity, err = parseCanonical("settlement quantity", st.Quantity, s.quantity); err != nil {
			return d, err
		}
		if a.estimated, err = parseCanonical("settlement estimate", st.Estimated, s.minor); err != nil {
			return d, err
		}
		if a.actual, err = parseCanonical("settlement actual", st.Actual, s.minor); err != nil {
			return d, err
		}
		if st.Correction != s.formatValue(a.actual-a.estimated) {
			return d, payloadError("settlement correction %q is not actual − estimated", st.Correction)
		}
		d.settlements = append(d.settlements, a)
	}
	if err := checkLeg(p.Request, p.Leg); err != nil {
		return d, err
	}
	_, err = parseRequest(p.Request, s, true)
	return d, err
}

func decodeEffect(r effectRecord, s scales) (effect, error) {
	e := effect{kind: r.Kind, layer: r.Layer}
	switch r.Kind {
	case effectInflow, effectInflowFront, effectOutflow, effectRemoveInflow, effectRevalue:
	default:
		return e, payloadError("effect %q", r.Kind)
	}
	var err error
	if r.Quantity != "" {
		if e.quantity, err = parseCanonical("effect quantity", r.Quantity, s.quantity); err != nil {
			return e, err
		}
	}
	if r.Value != "" {
		if e.value, err = parseCanonical("effect value", r.Value, s.minor); err != nil {
			return e, err
		}
	}
	if r.Rate != "" {
		if e.rate, err = parseCanonical("effect rate", r.Rate, s.rate()); err != nil {
			return e, err
		}
		e.rateGiven = true
	}
	if e.value == math.MinInt64 {
		return e, payloadError("effect value %q has no negation", r.Value)
	}
	needsQuantity := r.Kind != effectRevalue
	if needsQuantity != (e.quantity > 0) || e.quantity < 0 {
		return e, payloadError("effect %q with quantity %q", r.Kind, r.Quantity)
	}
	return e, nil
}

func encodeEffect(e effect, s scales) effectRecord {
	r := effectRecord{Kind: e.kind, Layer: e.layer}
	if e.kind != effectRevalue {
		r.Quantity = s.formatQuantity(e.quantity)
	}
	if e.kind != effectOutflow && !(e.kind == effectRevalue && e.rateGiven) {
		r.Value = s.formatValue(e.value)
	}
	if e.rateGiven {
		r.Rate = s.formatRate(e.rate)
	}
	return r
}

func checkLeg(r request, leg string) error {
	twoLegs := r.Kind == kindTransfer || r.Kind == kindReversal
	switch {
	case leg == "":
	case twoLegs && (leg == legSource || leg == legDestination):
	default:
		return payloadError("leg %q for a %s", leg, r.Kind)
	}
	return nil
}

// parsedRequest is a request with its amounts as units.
type parsedRequest struct {
	request
	quantity    int64
	unitCost    int64
	hasUnitCost bool
	value       int64
	hasValue    bool
}

// parseRequest checks a request's shape and parses its amounts at the given
// scales; withMinor false means the minor unit is unknown (a quantity
// payload), and money amounts are only checked for syntax.
func parseRequest(r request, s scales, withMinor bool) (parsedRequest, error) {
	p := parsedRequest{request: r}
	if err := checkNames(r); err != nil {
		return p, err
	}
	var err error
	if r.Quantity != "" {
		if p.quantity, err = parseCanonical("quantity", r.Quantity, s.quantity); err != nil {
			return p, err
		}
	}
	money := func(field, text string, scale uint8) (int64, bool, error) {
		if text == "" {
			return 0, false, nil
		}
		if !withMinor {
			if scale, err = inferScale(text); err != nil {
				return 0, false, err
			}
		}
		units, err := parseCanonical(field, text, scale)
		return units, true, err
	}
	if p.unitCost, p.hasUnitCost, err = money("unitCost", r.UnitCost, s.rate()); err != nil {
		return p, err
	}
	if p.value, p.hasValue, err = money("value", r.Value, s.minor); err != nil {
		return p, err
	}
	return p, checkShape(p)
}

func checkNames(r request) error {
	if _, err := ValueChain(r.Tenant, r.Item, r.Location); err != nil {
		return invalid(ErrInvalidOperation, "%v", err)
	}
	if err := checkOperationID("operation", r.Operation); err != nil {
		return err
	}
	if r.ToLocation != "" {
		if _, err := ValueChain(r.Tenant, r.Item, r.ToLocation); err != nil {
			return invalid(ErrInvalidOperation, "%v", err)
		}
	}
	if r.Reverses != "" {
		return checkOperationID("reverses", r.Reverses)
	}
	return nil
}

func checkOperationID(field, id string) error {
	if id == "" || len(id) > OperationIDLengthMax {
		return invalid(ErrInvalidOperation, "%s id of %d bytes (1 to %d)", field, len(id), OperationIDLengthMax)
	}
	if !utf8.ValidString(id) {
		return invalid(ErrInvalidOperation, "%s id %q is not valid UTF-8", field, id)
	}
	for i, r := range id {
		if unicode.IsControl(r) {
			return invalid(ErrInvalidOperation, "%s id %q has control character %U at byte %d", field, id, r, i)
		}
	}
	return nil
}

// checkShape checks which fields a kind of request carries.
func checkShape(p parsedRequest) error {
	has := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	quantity, toLocation, reverses := p.Quantity != "", p.ToLocation != "", p.Reverses != ""
	ok := false
	switch p.Kind {
	case kindReceipt:
		ok = quantity && has(p.hasUnitCost)+has(p.hasValue) == 1 && !toLocation && !reverses
	case kindIssue:
		ok = quantity && !p.hasValue && !toLocation && !reverses
	case kindAdjustment:
		ok = !quantity && has(p.hasUnitCost)+has(p.hasValue) == 1 && !toLocation && !reverses
	case kindTransfer:
		ok = quantity && !p.hasValue && toLocation && !reverses && p.ToLocation != p.Location
	case kindReversal:
		ok = !quantity && !p.hasUnitCost && !p.hasValue && !toLocation && reverses && p.Reverses != p.Operation
	default:
		return invalid(ErrInvalidOperation, "unknown kind %q", p.Kind)
	}
	if !ok {
		return invalid(ErrInvalidOperation, "a %s with fields %+v", p.Kind, p.request)
	}
	if quantity && p.quantity <= 0 {
		return invalid(ErrZeroQuantity, "quantity %s", p.Quantity)
	}
	if p.unitCost < 0 || (p.Kind == kindReceipt && p.value < 0) {
		return invalid(ErrNegativeAmount, "unit cost %q, value %q", p.UnitCost, p.Value)
	}
	if p.value == math.MinInt64 {
		return invalid(ErrOverflow, "value %s has no negation", p.Value)
	}
	if p.Kind == kindAdjustment && p.hasValue && p.value == 0 {
		return invalid(ErrInvalidOperation, "an adjustment of zero")
	}
	return nil
}
