// KitfoxError: every error kitfox throws. `code` is the engine's code name
// ('syntax', 'type', 'not_found', 'exists', 'constraint', 'limit', 'json',
// 'io', 'corrupt', 'locked', 'failed', 'invalid'), `message` the full text as
// the CLI prints it ("syntax error at 12: expected ..."), `position` the byte
// offset in the statement text, or -1.
export class KitfoxError extends Error {
  constructor(code, message, position = -1) {
    super(message);
    this.name = 'KitfoxError';
    this.code = code;
    this.position = position;
  }
}

// An error raised on the JS side, worded like the engine's.
export function kitfoxError(code, detail) {
  return new KitfoxError(code, `${code} error: ${detail}`, -1);
}

// What a host file layer throws: a code the engine understands and a message.
// Codes: 'not_found', 'locked', 'invalid', 'io' (anything else is 'io').
export class HostError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'HostError';
    this.code = code;
  }
}
