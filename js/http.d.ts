// TypeScript declarations for kitfox/http (js/http.js), the client of
// `kitfox serve`.
import type { KitfoxParam, NearOptions, Row } from './kitfox.js';

export { KitfoxError } from './kitfox.js';

export interface HttpConnectOptions {
  /** Sent as `Authorization: Bearer TOKEN` (kitfox serve --token). */
  token?: string;
  /** The fetch to use (default: globalThis.fetch). */
  fetch?: typeof fetch;
}

/** The server's database stats. */
export interface ServerStats {
  fileBytes: number;
  imageBytes: number;
  tailBytes: number;
  tailRecords: number;
  memoryBytes: number;
  /** Writes waiting at that moment for the writer landing writes to take them. */
  queuedWrites: number;
  /** Reads since the open that ran on a pinned copy of what they read, with no lock held. */
  readsPinned: number;
  /** Text and secondary indexes, and vector indexes' document maps, built beside the lock since the open (docs/storage.md). */
  builtBeside: number;
  collections: Array<{ name: string; documents: number; bytes: number }>;
  /**
   * Requests of /query, /batch and /docs run on an event loop, and handed to a worker thread, since the server
   * started; puts (`/docs`, a put of documents in `/query`) and batches read straight into their encoding.
   */
  server: { ranOnLoop: number; ranHandedOver: number; putsReadStraight: number; batchesReadStraight: number };
}

/** A statement the server checked (prepare): run it with new parameters. */
export class HttpStatement {
  readonly text: string;
  readonly isWrite: boolean;
  query<R extends Row = Row>(params?: KitfoxParam[]): Promise<R[]>;
  queryJSON(params?: KitfoxParam[] | string): Promise<string[]>;
  finalize(): void;
}

/** A kitfox server, with the methods of the embedded database as promises. */
export class KitfoxClient {
  constructor(url: string | URL, options?: HttpConnectOptions);
  readonly url: string;
  query<R extends Row = Row>(text: string, params?: KitfoxParam[]): Promise<R[]>;
  /** Each row as the server's JSON text (as the native CLI prints it). */
  queryJSON(text: string, params?: KitfoxParam[] | string): Promise<string[]>;
  batch(statements: Array<[string, KitfoxParam[]?] | [string] | string>): Promise<Row[][]>;
  near<R extends Row = Row>(collection: string, field: string, vector: Float32Array | Float64Array | number[], options?: NearOptions): Promise<R[]>;
  /** Puts documents in one atomic write (POST /docs/COLLECTION); resolves to their ids. */
  put(collection: string, docs: Array<{ [key: string]: KitfoxParam }>): Promise<number[]>;
  prepare(text: string): Promise<HttpStatement>;
  stats(): Promise<ServerStats>;
  health(): Promise<{ ok: true }>;
  close(): void;
}

/** Resolves once the server at `url` answers GET /health. */
export function connect(url: string | URL, options?: HttpConnectOptions): Promise<KitfoxClient>;
export default connect;
