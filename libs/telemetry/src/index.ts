import { NodeSDK } from '@opentelemetry/sdk-node';
import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';

/**
 * Starts OpenTelemetry tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set (the SDK reads the
 * standard OTEL_* variables), and does nothing otherwise, so `make dev` needs no collector.
 * Call it first in main.ts, before the modules it instruments are loaded. Spans carry no
 * request bodies or headers: the pg instrumentation is told not to record statement values.
 */
export function startTelemetry(serviceName: string): () => Promise<void> {
  if (!process.env.OTEL_EXPORTER_OTLP_ENDPOINT) return async () => undefined;
  const sdk = new NodeSDK({
    serviceName,
    instrumentations: [
      new HttpInstrumentation({ headersToSpanAttributes: { client: { requestHeaders: [] }, server: { requestHeaders: [] } } }),
      new GrpcInstrumentation(),
      new PgInstrumentation({ enhancedDatabaseReporting: false }),
    ],
  });
  sdk.start();
  return () => sdk.shutdown();
}
