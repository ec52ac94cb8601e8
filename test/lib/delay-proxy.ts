// A TCP proxy on 127.0.0.1 in front of a server (PostgreSQL in the tests) that
// delays the server's replies by `delayMs`, which a test may change at any time:
// a database that answers slowly, without touching the server.
import * as net from 'node:net';

export class DelayProxy {
  /** Milliseconds added to every chunk the server sends (0: none). */
  delayMs = 0;
  /**
   * Sees each chunk a client sends before it goes on to the server, with the local port
   * of the proxy's connection to the server (pg_stat_activity's client_port of the
   * backend that serves it): a test may stop that backend before it gets the chunk.
   */
  gate: ((chunk: Buffer, serverSidePort: number) => void) | null = null;
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly targetPort: number,
    readonly port: number,
    server: net.Server,
  ) {
    this.server = server;
  }

  /** Starts a proxy on a free port forwarding to 127.0.0.1:`targetPort`. */
  static async start(targetPort: number): Promise<DelayProxy> {
    let proxy: DelayProxy | null = null;
    const server = net.createServer((client) => proxy!.connect(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    proxy = new DelayProxy(targetPort, (server.address() as net.AddressInfo).port, server);
    return proxy;
  }

  /** Client bytes go straight through; server bytes each wait `delayMs` (in order: equal delays fire in order). */
  private connect(client: net.Socket): void {
    const upstream = net.connect(this.targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => this.sockets.delete(s));
    }
    client.on('data', (chunk: Buffer) => {
      this.gate?.(chunk, upstream.localPort ?? 0);
      upstream.write(chunk);
    });
    client.on('end', () => upstream.end());
    let last = 0;
    upstream.on('data', (chunk: Buffer) => {
      // Never earlier than the chunk before it, whatever the delay was then.
      const at = Math.max(Date.now() + this.delayMs, last);
      last = at;
      setTimeout(() => client.write(chunk), Math.max(0, at - Date.now()));
    });
    upstream.on('end', () => setTimeout(() => client.end(), Math.max(0, last - Date.now())));
    // Ended, not destroyed: what the client sent last (a COMMIT) still reaches a stopped server.
    client.on('close', () => upstream.end());
  }

  /** The URI `uri` (one of the cluster's) through this proxy. */
  through(uri: string): string {
    const u = new URL(uri);
    u.port = String(this.port);
    return u.toString();
  }

  /** Stops listening and cuts every connection. */
  close(): void {
    for (const s of this.sockets) s.destroy();
    this.server.close();
  }
}
