import type { EmbeddedServer } from './embedded-server';

// Jest loads global setup and teardown as separate modules in its main process; what they
// share is that process' global object.
const KEY = Symbol.for('nestjs-workhorse.test.embedded-server');

type Holder = { [KEY]?: EmbeddedServer };

export function setEmbeddedServer(server: EmbeddedServer): void {
  (globalThis as Holder)[KEY] = server;
}

export function takeEmbeddedServer(): EmbeddedServer | undefined {
  const holder = globalThis as Holder;
  const server = holder[KEY];
  delete holder[KEY];
  return server;
}
