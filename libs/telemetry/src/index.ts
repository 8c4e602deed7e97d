import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { AlwaysOffSampler } from '@opentelemetry/sdk-trace';

/** Query parameters whose values spans never record: the instrumentation's own list (signed URLs) and our feed tokens. */
const REDACTED_QUERY_PARAMS = [
  'sig',
  'Signature',
  'AWSAccessKeyId',
  'X-Goog-Signature',
  'X-Amz-Signature',
  'X-Amz-Credential',
  'X-Amz-Security-Token',
  'token',
];

/**
 * Starts OpenTelemetry, each half on its own switch, so `make dev` needs neither:
 * - traces (and OTLP metrics) when `tracing` (OTEL_EXPORTER_OTLP_ENDPOINT is set; the SDK reads the
 *   standard OTEL_* variables itself: endpoint, sampler, resource attributes…);
 * - metrics on a Prometheus endpoint (GET :metricsPort/metrics) when `metricsPort` is given, with or
 *   without a trace collector.
 * The caller reads the settings with its configuration (libs/service's main: METRICS_PORT, METRICS_HOST).
 * Call it before the modules it instruments are loaded. Spans carry no request bodies or headers, nor a feed token of a URL's query:
 * the pg instrumentation is told not to record statement values.
 */
export function startTelemetry(
  serviceName: string,
  settings: { tracing: boolean; metricsPort: number | undefined; metricsHost: string },
): () => Promise<void> {
  const { tracing, metricsPort } = settings;
  if (!tracing && metricsPort === undefined) return async () => undefined;
  // The exporter's own server cannot listen on `::` (it builds its base URL from the host), so it
  // gets one of ours: `::` (METRICS_HOST) is every address, IPv6 and IPv4, as the other listeners.
  const prometheus = new PrometheusExporter({ preventServerStart: true });
  const metricsServer =
    metricsPort === undefined
      ? undefined
      : createServer((req, res) => {
          if ((req.url ?? '').split('?')[0] === '/metrics') return prometheus.getMetricsRequestHandler(req, res);
          res.statusCode = 404;
          res.end('metrics are at /metrics\n');
        })
          .listen(metricsPort, settings.metricsHost)
          .unref();
  const sdk = new NodeSDK({
    serviceName,
    instrumentations: [
      new HttpInstrumentation({
        headersToSpanAttributes: { client: { requestHeaders: [] }, server: { requestHeaders: [] } },
        // Spans record url.query: a calendar feed URL's `token` is a secret (shown as REDACTED).
        redactedQueryParams: REDACTED_QUERY_PARAMS,
        redactedQueryParamsServer: REDACTED_QUERY_PARAMS,
      }),
      new GrpcInstrumentation(),
      new PgInstrumentation({ enhancedDatabaseReporting: false }),
    ],
    ...(metricsPort !== undefined ? { metricReaders: [prometheus] } : {}),
    // Without a collector nothing is exported but metrics: no span or log exporter to a default address,
    // and no span recorded (the instrumentations' spans, which nothing would read, cost each request
    // tens of µs of CPU in every process: docs/benchmarks.md). Their metrics are recorded all the same.
    ...(tracing ? {} : { spanProcessors: [], logRecordProcessors: [], sampler: new AlwaysOffSampler() }),
  });
  sdk.start();
  // The instrumentations patch a package when it is require()d; our ES modules import grpc-js, which
  // no require hook sees. Required once here, it is patched in the module object every importer
  // shares. (Until reflection was imported only when on, @grpc/reflection's own require did this.)
  createRequire(import.meta.url)('@grpc/grpc-js');
  return async () => {
    metricsServer?.close();
    await sdk.shutdown();
  };
}
