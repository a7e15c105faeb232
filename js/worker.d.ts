// TypeScript declarations for kitfox/worker (js/worker.js). The connection's
// types are declared in kitfox.d.ts beside Kitfox's and re-exported here.
import type { ConnectOptions, KitfoxConnection } from './kitfox.js';

export type {
  ConnectOptions,
  ConnectTimings,
  KitfoxChangeEvent,
  KitfoxConnection,
  KitfoxLeaderEvent,
  StatementConnection,
} from './kitfox.js';
export { KitfoxError } from './kitfox.js';

/**
 * Opens `name` (an OPFS file name) in a dedicated module worker, shared with
 * the other tabs and workers of this origin that open the same name: one of
 * them leads (its worker holds the file) and the others' calls go to it,
 * with the same answers. When the leader goes away another connection
 * takes over; a write in flight then fails with KitfoxError 'failed' (it
 * may have landed: check, then retry), a read is sent again. Listen with
 * `conn.on('change', ({ collections }) => ...)`.
 *
 * `{ exclusive: true }`, ':memory:' and a database file's bytes open in this
 * connection's own worker alone; another tab or worker then gets KitfoxError
 * 'locked'. Rejects with 'locked' too when an exclusive connection (or code
 * outside kitfox) holds the file.
 */
export function connect(name: string | Uint8Array | ArrayBuffer, options?: ConnectOptions): Promise<KitfoxConnection>;
export default connect;
