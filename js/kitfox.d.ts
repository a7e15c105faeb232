// TypeScript declarations for the kitfox npm package (js/index.js, js/browser.js;
// kitfox/worker's connect() is in worker.d.ts, its connection type here).

/** A value as it comes out of the engine (see docs/wasm.md for the mapping). */
export type KitfoxValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Date
  | Uint8Array
  | Float32Array
  | KitfoxValue[]
  | { [key: string]: KitfoxValue };

/** A value that can be passed as a parameter ($1, $2, ...). */
export type KitfoxParam =
  | null
  | undefined
  | boolean
  | number
  | bigint
  | string
  | Date
  | Uint8Array
  | ArrayBuffer
  | Float32Array
  | Float64Array
  | KitfoxParam[]
  | { [key: string]: KitfoxParam };

/** A row: a plain object with `id` first, then the fields. */
export type Row = { [key: string]: KitfoxValue };

/** The engine's error codes. */
export type KitfoxErrorCode =
  | 'syntax'
  | 'type'
  | 'not_found'
  | 'exists'
  | 'constraint'
  | 'limit'
  | 'json'
  | 'io'
  | 'corrupt'
  | 'locked'
  | 'failed'
  | 'invalid';

/** Every error kitfox throws. */
export class KitfoxError extends Error {
  constructor(code: KitfoxErrorCode, message: string, position?: number);
  readonly name: 'KitfoxError';
  /** The engine's code name, e.g. 'syntax', 'type', 'locked'. */
  readonly code: KitfoxErrorCode;
  /** The full text, as the CLI prints it: "syntax error at 12: expected ...". */
  readonly message: string;
  /** Byte offset in the statement text, or -1. */
  readonly position: number;
}

export interface OpenOptions {
  /**
   * Durability: 'always' (flushed before each write returns), 'off' (flushed
   * on checkpoint and close), or a period in milliseconds (default 250).
   */
  sync?: 'always' | 'off' | number | `${number}` | `${number}ms`;
  /** Create the file when it does not exist (default true). */
  create?: boolean;
  /**
   * Node only: how the writer lock is taken. 'auto' (default) is 'socket' on
   * Linux and 'file' elsewhere. See docs/wasm.md.
   */
  lock?: 'auto' | 'socket' | 'file';
  /**
   * Browser (OPFS) only: how long to wait, in ms, for another tab or worker
   * to let go of the database before failing with 'locked' (default 0: at
   * once). A page refreshed while its worker was busy (a long write, an
   * index build) can leave that worker running for a few seconds; a page
   * that opens its database at load may pass e.g. 10000.
   */
  lockTimeout?: number;
  /**
   * Browser (OPFS) only: how vector tables and HNSW graphs are read. true:
   * block by block when a query first needs them; false: the whole file in
   * one read on open. By default the host times a few small reads on open
   * and reads on demand when they are cheap (a normal profile, OPFS on
   * disk), the whole file when they are slow (a private window, OPFS in
   * memory). ConnectTimings.readsOnDemand says which way was taken. See
   * docs/wasm.md.
   */
  readsOnDemand?: boolean;
  /**
   * Opening leaves vector tables and HNSW graphs to be read when a query
   * first needs them; while the host is idle the rest is read in slices of
   * a few milliseconds. false turns those background reads off (default
   * true). See docs/wasm.md.
   */
  warm?: boolean;
}

export interface NearOptions {
  /** How many neighbours (default 10). */
  limit?: number;
  /** Search breadth of the HNSW index. */
  ef?: number;
  /** Exact search (a scan) instead of the index. */
  exact?: boolean;
  /** A filter expression, e.g. 'year > $1', with its params. */
  where?: string;
  params?: KitfoxParam[];
  /** Paths to return (id and _distance always come). */
  select?: string | string[];
}

export interface CollectionStats {
  name: string;
  documents: number;
  bytes: number;
}

export interface Stats {
  fileBytes: number;
  imageBytes: number;
  tailBytes: number;
  tailRecords: number;
  memoryBytes: number;
  collections: CollectionStats[];
  /** What opening found and did. */
  open: {
    tornBytes: number;
    recoveredBytes: number;
    tailRecords: number;
    sideFileRestored: boolean;
    indexRebuilt: boolean;
    warnings: string[];
  };
  /** The size of the WASM heap, shared by the databases of this process. */
  wasmMemoryBytes: number;
}

/**
 * A prepared statement (Kitfox.prepare): parsed and bound once, run again
 * with new parameters without parsing. It is bound again by itself when its
 * collection is altered, dropped or given an index; while a name it uses is
 * gone it throws `not_found`.
 */
export class Statement {
  private constructor();
  readonly text: string;
  query<R extends Row = Row>(params?: KitfoxParam[]): R[];
  queryJSON(params?: KitfoxParam[] | string): string[];
  /** Frees it now (else when it is garbage collected or its database closes). */
  finalize(): void;
}

export class Kitfox {
  private constructor();

  /**
   * Opens or creates a database: a file path (Node), ':memory:', or the bytes
   * of a database file (opened in memory; the array is copied).
   */
  static open(target?: string | Uint8Array | ArrayBuffer, options?: OpenOptions): Promise<Kitfox>;

  /** The size of the WASM heap (all databases of this process share it). */
  static wasmMemoryBytes(): Promise<number>;

  /** 'node' or 'web': which host layer a database name opens with. */
  static readonly platform: 'node' | 'web';

  readonly closed: boolean;

  /**
   * Runs one statement and returns its rows. Write statements are atomic.
   * Recent statement texts are kept parsed, so running the same text again
   * costs what a prepared statement does (but for sending the text).
   */
  query<R extends Row = Row>(text: string, params?: KitfoxParam[]): R[];

  /** Parses and binds a statement once; see Statement. */
  prepare(text: string): Statement;

  /**
   * Runs one statement and returns each row as JSON text, exactly as the
   * native build prints it. `params` may be an array or JSON text.
   */
  queryJSON(text: string, params?: KitfoxParam[] | string): string[];

  /**
   * Runs statements (put, insert, set, del and reads) atomically: each sees
   * the ones before it, and all land as one record or none does (a failure
   * throws a KitfoxError naming the statement and changes nothing).
   * Returns one array of rows per statement.
   */
  batch(statements: Array<[string, KitfoxParam[]?] | [string]>): Row[][];

  /** The nearest neighbours of `vector` in `collection`.`field` (rows carry `_distance`). */
  near<R extends Row = Row>(
    collection: string,
    field: string,
    vector: Float32Array | Float64Array | number[],
    options?: NearOptions,
  ): R[];

  /** Writes a new image of the file and empties its write log. */
  checkpoint(): void;

  /** Flushes every write so far to durable storage. */
  sync(): void;

  /** The database file's bytes, after a checkpoint. */
  export(): Uint8Array;

  stats(): Stats;

  /**
   * Closes the database and frees its memory. Closing twice is allowed. Over
   * OPFS (in a worker) it returns a Promise that settles once the file is let
   * go (handles closed, Web Lock dropped); elsewhere it returns nothing.
   */
  close(): void | Promise<void>;
}

export default Kitfox;

/** Options of connect() from kitfox/worker. */
export interface ConnectOptions extends Omit<OpenOptions, 'lock'> {
  /**
   * The URL of an ES module the worker imports: its exported functions run in
   * the worker next to the database through KitfoxConnection.call().
   */
  module?: string | URL;
}

/** How long connect() took, in milliseconds. */
export interface ConnectTimings {
  /** From connect() to the database being open, worker start included. */
  totalMs: number;
  /** From the worker's creation to its main module running (the package's modules fetched and evaluated). */
  startMs: number;
  /** Fetching, compiling and instantiating the WASM module, from the worker's main module running. */
  loadMs: number;
  /** Opening the database over OPFS (Kitfox.open: lock and handles while the WASM module finishes loading, then the engine's open). */
  openMs: number;
  /** True when vector tables and graphs are read block by block on first use (OPFS reads are cheap: a normal profile); false when the whole file was read on open (slow reads: a private window's in-memory OPFS). */
  readsOnDemand: boolean;
}

/**
 * A database open in a dedicated worker (kitfox/worker): Kitfox's methods as
 * promises. Errors reject with KitfoxError (code, message, position).
 */
/** A prepared statement in the worker (KitfoxConnection.prepare). */
export interface StatementConnection {
  readonly text: string;
  query<R extends Row = Row>(params?: KitfoxParam[]): Promise<R[]>;
  queryJSON(params?: KitfoxParam[] | string): Promise<string[]>;
  /** Frees it in the worker. */
  finalize(): Promise<void>;
}

export interface KitfoxConnection {
  readonly timings: ConnectTimings;
  prepare(text: string): Promise<StatementConnection>;
  /** True once closed or once the worker stopped. */
  readonly closed: boolean;
  query<R extends Row = Row>(text: string, params?: KitfoxParam[]): Promise<R[]>;
  queryJSON(text: string, params?: KitfoxParam[] | string): Promise<string[]>;
  batch(statements: Array<[string, KitfoxParam[]?] | [string]>): Promise<Row[][]>;
  near<R extends Row = Row>(
    collection: string,
    field: string,
    vector: Float32Array | Float64Array | number[],
    options?: NearOptions,
  ): Promise<R[]>;
  checkpoint(): Promise<void>;
  sync(): Promise<void>;
  /** The database file's bytes, after a checkpoint (transferred from the worker). */
  export(): Promise<Uint8Array>;
  stats(): Promise<Stats>;
  /**
   * Runs `name(db, args, progress)` exported by options.module in the worker;
   * each `progress(value)` there calls `onProgress(value)` here.
   */
  call<T = unknown, P = unknown>(name: string, args?: unknown, options?: { onProgress?: (value: P) => void }): Promise<T>;
  /** Closes the database, drops its lock and ends the worker. Closing twice is allowed. */
  close(): Promise<void>;
}
