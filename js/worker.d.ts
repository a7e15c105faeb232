// TypeScript declarations for kitfox/worker (js/worker.js).
import type { ConnectOptions, KitfoxConnection } from './kitfox.js';

export type { ConnectOptions, ConnectTimings, KitfoxConnection, StatementConnection } from './kitfox.js';
export { KitfoxError } from './kitfox.js';

/**
 * Starts a dedicated module worker and opens `name` there over OPFS (or
 * ':memory:', or a database file's bytes). Rejects with KitfoxError code
 * 'locked' when another tab or worker has the database open.
 */
export function connect(name: string | Uint8Array | ArrayBuffer, options?: ConnectOptions): Promise<KitfoxConnection>;
export default connect;
