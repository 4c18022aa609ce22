import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A Unix socket in a directory of its own that forwards every connection to a TCP port. */
export interface UnixSocketProxy {
  /** The directory, as PostgreSQL clients name it (`host=<directory>`). */
  directory: string;
  /** The port the socket's file name carries (`.s.PGSQL.<port>`): the TCP server's port. */
  port: number;
  close(): Promise<void>;
}

/**
 * Serves PostgreSQL's Unix-socket convention (`<directory>/.s.PGSQL.<port>`) for a server that
 * listens on TCP only (the embedded test server has no socket): each connection is piped to
 * 127.0.0.1:`port`, so a client that connects through the socket directory reaches that server.
 */
export async function unixSocketProxy(port: number): Promise<UnixSocketProxy> {
  const directory = mkdtempSync(join(tmpdir(), 'wh-socket-'));
  const sockets = new Set<Socket>();
  const server = createServer((incoming) => {
    const outgoing = connect(port, '127.0.0.1');
    for (const socket of [incoming, outgoing]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    incoming.pipe(outgoing).pipe(incoming);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(join(directory, `.s.PGSQL.${port}`), () => resolve());
  });
  return {
    directory,
    port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
