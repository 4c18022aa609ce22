import { createServer, type Socket } from 'node:net';

/**
 * A TCP listener on 127.0.0.1 that accepts every connection and never says a word: what a
 * client meets at a port of another service, behind a stalled proxy or a firewall that
 * swallows packets. It counts the connections it accepted and how many the clients closed.
 */
export interface SilentServer {
  port: number;
  /** `postgres://` URL of a database on it. */
  url: string;
  accepted: number;
  /** Connections the client side closed (it gave up); the server never closes one by itself. */
  closedByClient: number;
  /** Closes the listener and any connection still open. */
  close(): Promise<void>;
}

export function startSilentServer(): Promise<SilentServer> {
  return new Promise((resolve, reject) => {
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      state.accepted += 1;
      sockets.add(socket);
      socket.on('error', () => undefined);
      // Read and drop what the client sends (its startup message), so its hang-up is seen.
      socket.resume();
      socket.on('close', () => {
        if (sockets.delete(socket)) state.closedByClient += 1;
      });
    });
    const state: SilentServer = {
      port: 0,
      url: '',
      accepted: 0,
      closedByClient: 0,
      close: () =>
        new Promise<void>((done) => {
          for (const socket of sockets) {
            sockets.delete(socket);
            socket.destroy();
          }
          server.close(() => done());
        }),
    };
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      state.port = typeof address === 'object' && address !== null ? address.port : 0;
      state.url = `postgres://app:secret@127.0.0.1:${state.port}/shop`;
      resolve(state);
    });
  });
}
