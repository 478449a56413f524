package main

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// serviceNameDefault is the service.name of serve's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
const serviceNameDefault = "ledger"

// serveTracing builds serve's tracer provider from the OTEL_* variables,
// or returns nil (no tracing, no cost) when they ask for no exporter:
// tracing is on when OTEL_TRACES_EXPORTER is "otlp", or when it is unset
// and OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set; OTEL_SDK_DISABLED=true turns it off. The exporter speaks
// OTLP/HTTP with protobuf and reads its own variables (endpoint, headers,
// timeout, compression, certificates); the SDK reads OTEL_TRACES_SAMPLER
// (parentbased_always_on when unset), OTEL_TRACES_SAMPLER_ARG and
// OTEL_BSP_*. The provider becomes the global one, with the W3C trace
// context as the global propagator. shutdown flushes the spans.
func (a *app) serveTracing(ctx context.Context) (tp *sdktrace.TracerProvider, shutdown func(context.Context) error, err error) {
	env := a.environment
	if env == nil {
		return nil, nil, nil
	}
	if strings.EqualFold(strings.TrimSpace(env("OTEL_SDK_DISABLED")), "true") {
		return nil, nil, nil
	}
	switch exporter := strings.TrimSpace(env("OTEL_TRACES_EXPORTER")); exporter {
	case "":
		if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil, nil
		}
	case "none":
		return nil, nil, nil
	case "otlp":
	default:
		return nil, nil, invalidInputf("OTEL_TRACES_EXPORTER=%q: want otlp or none", exporter)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(env(name)); p != "" {
			if p != "http/protobuf" {
				return nil, nil, invalidInputf("%s=%q: serve exports over http/protobuf only", name, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, invalidInputf("OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", serviceNameDefault)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, nil, invalidInputf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp, func(ctx context.Context) error {
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("flushing the spans: %w", err)
		}
		return nil
	}, nil
}
