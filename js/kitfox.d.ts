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

/**
 * What a host file layer throws: `code` is 'not_found', 'locked', 'invalid'
 * or 'io' (anything else counts as 'io'). A plain object or Error with a
 * `code` and a `message` works as well.
 */
export class HostError extends Error {
  constructor(code: 'not_found' | 'locked' | 'invalid' | 'io', message: string);
  readonly name: 'HostError';
  readonly code: 'not_found' | 'locked' | 'invalid' | 'io';
}

/**
 * A file layer for the engine (the `host` open option): keeps the database
 * file, named by Kitfox.open's first argument, in the application's own
 * storage. Every method is synchronous; a host whose storage is
 * asynchronous does its asynchronous work before Kitfox.open and after
 * close(). Files are few: the database, its checkpoint side file (`NAME~~`
 * when `atomicReplace` is true, else `NAME~`), and with `recover` the
 * damaged original it saves (`NAME.damaged`).
 * See docs/wasm.md, "Host file layers", and
 * examples/cloudflare-durable-object for one over a Durable Object's storage.
 */
export interface KitfoxHost {
  /** True when `replace` is atomic (a rename); false when it copies (the engine then finishes an interrupted copy on open). */
  readonly atomicReplace: boolean;
  /** Optional: bytes an on-demand read may as well fetch when every call is slow (0: read block by block). */
  readonly readChunk?: number;
  /** Opens a file and returns a handle; creates it when `create`; `exclusive` is the writer lock (throw code 'locked' when it is held). */
  open(name: string, create: boolean, exclusive: boolean): number;
  /** Fills `dest` (a view of the WASM heap: copy out of it, never keep it) from `offset`; returns the bytes read, fewer only at the end of the file. */
  read(handle: number, offset: number, dest: Uint8Array): number;
  /** Writes all of `src` (a view of the WASM heap) at `offset`, growing the file. */
  write(handle: number, offset: number, src: Uint8Array): void;
  /** Makes every byte written so far durable. */
  sync(handle: number): void;
  size(handle: number): number;
  /** Cuts or extends (with zeros) the file to `size` bytes. */
  truncate(handle: number, size: number): void;
  close(handle: number): void;
  exists(name: string): boolean;
  /** Removing a missing file is not an error. */
  remove(name: string): void;
  /** Puts `from` in the place of `to`, so that a crash leaves one or the other whole; handles on `from` then refer to `to`. */
  replace(from: string, to: string): void;
  /** Optional: called once after the database closed. */
  release?(): void;
  /** Optional: set by a host whose release finishes asynchronously; Kitfox#close() returns it. */
  readonly released?: Promise<void>;
}

/**
 * The compiled module of dist/kitfox-core.wasm, its bytes, or the URL to
 * fetch it from (a Promise of any of these works too).
 */
export type KitfoxWasm = WebAssembly.Module | Uint8Array | ArrayBuffer | URL | string;

export interface OpenOptions {
  /**
   * The WebAssembly module, for hosts where the package cannot find or
   * compile it by itself: a compiled WebAssembly.Module (hosts that forbid
   * compiling from bytes, such as Cloudflare Workers without the `workerd`
   * condition), or its bytes or URL (a bundler that does not emit the
   * package's .wasm, such as esbuild). Used when the module loads (the
   * first open in a process or worker), ignored after.
   */
  wasm?: KitfoxWasm | Promise<KitfoxWasm>;
  /**
   * A host that keeps the file named by Kitfox.open's first argument in
   * your own storage (see KitfoxHost). Without it a name is a path (Node)
   * or an OPFS file (a dedicated worker).
   */
  host?: KitfoxHost;
  /**
   * Durability: 'always' (flushed before each write returns), 'off' (flushed
   * on checkpoint and close), or a period in milliseconds (default 250).
   */
  sync?: 'always' | 'off' | number | `${number}` | `${number}ms`;
  /** Create the file when it does not exist (default true). */
  create?: boolean;
  /**
   * Open a damaged file as `kitfox --recover` does (default false): keep
   * everything before the damage, save the damaged original beside the file
   * as `NAME.damaged`, and say what was cut in `stats().open.warnings`.
   * Where the host keeps no file but the database's (OPFS), the copy cannot
   * be saved and the open fails.
   */
  recover?: boolean;
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

  /** Which platform layer the package's entry point chose: 'node' (Node, Deno, Bun), 'web' (browsers, workers, other edge runtimes), 'workerd' (Cloudflare Workers). */
  static readonly platform: 'node' | 'web' | 'workerd';

  readonly closed: boolean;

  /**
   * Runs one statement and returns its rows. Write statements are atomic.
   * The 64 most recent statement texts (up to 1,024 characters) are kept
   * prepared, so running the same text again costs what a prepared
   * statement does.
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
export interface ConnectOptions extends Omit<OpenOptions, 'lock' | 'host' | 'wasm'> {
  /**
   * The WebAssembly module (see OpenOptions.wasm): compiled on the page and
   * handed to the worker.
   */
  wasm?: KitfoxWasm | Promise<KitfoxWasm>;
  /**
   * The URL of the worker script, for a bundler that does not bundle
   * `new Worker(new URL(..., import.meta.url))` by itself (esbuild): build
   * `kitfox/worker-main` as an entry point of its own and pass its URL.
   */
  workerUrl?: string | URL;
  /**
   * The URL of an ES module the worker imports: its exported functions run in
   * the worker next to the database through KitfoxConnection.call() (in the
   * leader's worker, which imports each connection's own module).
   */
  module?: string | URL;
  /**
   * true: this connection alone holds the database, as before sharing
   * between tabs: another tab's or worker's connect() (shared or not) gets
   * KitfoxError 'locked'. Default false: the connections of this origin to
   * the same OPFS name share one database, served by a leader tab's worker
   * (docs/wasm.md, "Sharing between tabs"). ':memory:' and bytes are never
   * shared.
   */
  exclusive?: boolean;
}

/** What KitfoxConnection.on('change') hears after a write lands, in every tab. */
export interface KitfoxChangeEvent {
  /** The collections the write changed (documents or definitions), sorted. */
  collections: string[];
}

/** What KitfoxConnection.on('leader') hears when the tab serving the database changes. */
export interface KitfoxLeaderEvent {
  /** True when this connection's own worker now holds the file. */
  isLeader: boolean;
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
  /** How long connect() took; a follower's start, load and open times are 0 (nothing was opened). */
  readonly timings: ConnectTimings;
  /** Prepared in the leader's worker; prepared again by itself on a new leader after a takeover. */
  prepare(text: string): Promise<StatementConnection>;
  /** True once close() was called (its calls are refused from then), or broken (an exclusive connection's worker stopped; a takeover could not reopen the file). */
  readonly closed: boolean;
  /** True while this connection's own worker holds the file (always, for an exclusive one). */
  readonly isLeader: boolean;
  /**
   * 'change': after a write lands (from any tab of the database, this one
   * too), with the collections it changed; a read issued after it sees the
   * write. 'leader': when this connection starts following another tab's
   * leader or starts leading. Returns a function that unsubscribes.
   */
  on(event: 'change', listener: (event: KitfoxChangeEvent) => void): () => void;
  on(event: 'leader', listener: (event: KitfoxLeaderEvent) => void): () => void;
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
  /**
   * Closes the connection once the calls made before it are answered. The
   * last connection (or an exclusive one) closes the database, drops its
   * lock and ends the worker; a leader with followers hands the database
   * over to one of them. Closing twice is allowed.
   */
  close(): Promise<void>;
}
