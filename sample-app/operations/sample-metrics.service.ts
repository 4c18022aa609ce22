import { Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The OpenTelemetry SDK of the sample app: a meter provider whose only reader is the Prometheus
 * exporter, registered globally when the module is built (before the worker starts, which is
 * when nestjs-workhorse looks for an SDK). The exporter serves no port of its own: `GET /metrics`
 * on the app's HTTP server answers with its text.
 */
@Injectable()
export class SampleMetrics implements OnApplicationShutdown {
  private readonly exporter = new PrometheusExporter({ preventServerStart: true });
  private readonly provider = new MeterProvider({ readers: [this.exporter] });

  constructor() {
    metrics.setGlobalMeterProvider(this.provider);
  }

  /** Answers a scrape in Prometheus's text format. */
  scrape(request: IncomingMessage, response: ServerResponse): void {
    this.exporter.getMetricsRequestHandler(request, response);
  }

  async onApplicationShutdown(): Promise<void> {
    metrics.disable();
    await this.provider.shutdown();
  }
}
