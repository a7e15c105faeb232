// The names kitfox/worker's tabs meet under when they share a database
// (js/worker.js on the page, js/worker-main.js in the leader's worker): Web
// Locks and BroadcastChannels, all scoped to the origin by the browser. For
// a database NAME:
//
//   lock    kitfox-leader:NAME           held by the page of the leading tab
//                                        for as long as it leads; every other
//                                        shared connection waits for it
//   lock    kitfox-epoch:NAME:LEADER     held by the leader's worker while it
//                                        lives; followers ask for it in shared
//                                        mode: granted once that worker is gone
//   lock    kitfox-client:NAME:CLIENT    held by each connection for its life;
//                                        the leader's worker asks for it to
//                                        learn that the connection is gone
//   lock    kitfox:NAME                  the file's own writer lock (js/hosts/opfs.js)
//   channel kitfox:NAME                  announcements: who, leader, resigning, change
//   channel kitfox-to-leader:NAME:LEADER a follower's calls to that leader
//   channel kitfox-to-client:NAME:CLIENT the leader's answers to that connection
//
// LEADER and CLIENT are random UUIDs (36 characters).

// How long a tab taking over waits for the previous leader's worker to let
// go of the file: a worker busy in a long call runs on for a few seconds
// after its tab is gone (docs/wasm.md, "Sharing between tabs").
export const TAKEOVER_WAIT_MS = 60000;

// How long a resigning leader (its tab called close()) waits for its
// followers to say they sent it nothing more, answering 'moved' meanwhile.
export const DRAIN_MS = 5000;

export const leaderLock = (name) => `kitfox-leader:${name}`;
export const epochPrefix = (name) => `kitfox-epoch:${name}:`;
export const epochLock = (name, leader) => epochPrefix(name) + leader;
export const clientLock = (name, client) => `kitfox-client:${name}:${client}`;
export const controlChannel = (name) => `kitfox:${name}`;
export const requestChannel = (name, leader) => `kitfox-to-leader:${name}:${leader}`;
export const replyChannel = (name, client) => `kitfox-to-client:${name}:${client}`;

export function uuid() {
  if (typeof crypto !== 'undefined' && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// Whether this context can share: Web Locks and BroadcastChannel.
export function canShare() {
  return typeof navigator !== 'undefined' && !!navigator.locks && typeof navigator.locks.request === 'function' && typeof BroadcastChannel === 'function';
}
