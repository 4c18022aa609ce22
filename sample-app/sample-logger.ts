import { ConsoleLogger } from '@nestjs/common';
import type { SampleConfig } from './sample-config';

/**
 * Nest's console logger, prefixed with the process's role (`[app]`, `[api]`, `[worker]`), or
 * one JSON object per line with `SAMPLE_LOG_FORMAT=json` (the demo reads its children's logs so).
 */
export function createSampleLogger(role: string, config: Pick<SampleConfig, 'logFormat'>): ConsoleLogger {
  return config.logFormat === 'json' ? new ConsoleLogger({ json: true, colors: false }) : new ConsoleLogger({ prefix: role });
}
