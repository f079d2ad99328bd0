// library.ts — the Redis function library this client speaks: finding its text, reading its
// version, and making sure Redis has it (docs/redis-functions.md, "Versioning").
//
// Why the client brings its own copy: a version is the content of the library (12 hex digits of
// a SHA1, in the library's and every function's name), so a client calls exactly the code it was
// tested with, side by side with any other version another client or ratelimitd loaded.
// Where the text comes from, first found wins: the `library` option (text or a file path), the
// RATELIMIT_REDIS_LIBRARY environment variable (a file, or a directory holding one
// ratelimit_<version>.lua), the copy bundled in this package (library/, filled by `npm pack`).

import * as fs from 'fs';
import * as path from 'path';
import { RateLimitError } from './errors';

export interface FunctionLibrary {
  /** 12 lower-case hex digits. */
  version: string;
  /** The FUNCTION LOAD-able text (null when only the version was given). */
  text: string | null;
}

const HEADER = /^#!lua name=ratelimit_([0-9a-f]{12})\n/;

/** Parses a library's text; throws RateLimitError when it is not a ratelimit library. */
export function parseLibrary(text: string): FunctionLibrary {
  const m = HEADER.exec(text);
  if (!m) throw new RateLimitError('library_missing', "not a ratelimit function library (its first line must be '#!lua name=ratelimit_<12 hex digits>')");
  return { version: m[1], text };
}

function fromPath(p: string): FunctionLibrary {
  let file = p;
  if (fs.statSync(p).isDirectory()) {
    const found = fs.readdirSync(p).filter((f) => /^ratelimit_[0-9a-f]{12}\.lua$/.test(f));
    if (found.length !== 1) {
      throw new RateLimitError('library_missing', `${p} holds ${found.length} ratelimit_<version>.lua files, expected exactly one`);
    }
    file = path.join(p, found[0]);
  }
  return parseLibrary(fs.readFileSync(file, 'utf8'));
}

/** The library to use: `option` (text, a path, or {version} of one already loaded), else the
 *  environment, else the bundled copy. */
export function findLibrary(option?: string | { version: string }): FunctionLibrary {
  if (option !== undefined && typeof option === 'object') {
    if (!/^[0-9a-f]{12}$/.test(option.version)) throw new RateLimitError('library_missing', `library version must be 12 hex digits, got '${option.version}'`);
    return { version: option.version, text: null };
  }
  if (typeof option === 'string') return option.startsWith('#!lua') ? parseLibrary(option) : fromPath(option);
  const env = process.env.RATELIMIT_REDIS_LIBRARY;
  if (env) return fromPath(env);
  const bundled = path.join(__dirname, '..', 'library');
  if (fs.existsSync(bundled)) return fromPath(bundled);
  throw new RateLimitError('library_missing', 'no ratelimit function library: pass the `library` option (the file share/ratelimit/redis/ratelimit_<version>.lua of a ratelimit build or install), set RATELIMIT_REDIS_LIBRARY, or install a packed @ratelimit/client (it bundles one)');
}

/** What a client needs of a Redis connection: one command at a time. */
export type Call = (command: string, ...args: (string | number)[]) => Promise<unknown>;

/** Makes sure Redis has `lib`: loads it when it has the text, else checks it is there. When it
 *  is missing and cannot be loaded, the error says which versions Redis has and what to do. */
export async function ensureLibrary(call: Call, lib: FunctionLibrary): Promise<void> {
  let loadError = '';
  if (lib.text !== null) {
    try {
      await call('FUNCTION', 'LOAD', lib.text);
      return;
    } catch (e) {
      const msg = (e as Error).message;
      if (/already exists/.test(msg)) return;
      loadError = ` (FUNCTION LOAD failed: ${msg})`;
    }
  }
  const listed = (await call('FUNCTION', 'LIST', 'LIBRARYNAME', 'ratelimit_*')) as unknown[];
  const names: string[] = [];
  for (const entry of listed ?? []) {
    const fields = entry as unknown[];
    for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === 'library_name') names.push(String(fields[i + 1]));
  }
  if (names.includes(`ratelimit_${lib.version}`)) return;
  throw new RateLimitError('library_missing',
    `Redis does not have the ratelimit function library version ${lib.version} that this client speaks${loadError}; ` +
    `it has ${names.length ? names.join(', ') : 'no ratelimit library'}. Load this client's copy ` +
    `(redis-cli -x FUNCTION LOAD < ratelimit_${lib.version}.lua), or give the client the text so it loads it itself; ` +
    'other versions may stay loaded beside it.');
}
